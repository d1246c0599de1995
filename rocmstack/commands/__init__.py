"""The command layer: one small module per command, each parsing its options and calling the domain.

Nothing in the domain imports these modules, and they do not import each other."""
