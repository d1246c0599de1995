"""Known-bad versions and error signatures of the field, as data: one YAML file per advisory
(rocmstack/advisories/data/, and a lab's own folder), matched against a recipe's pins before a build, a
node's inventory by the doctor, and the failure text of every run."""
