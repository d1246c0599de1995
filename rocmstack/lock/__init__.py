"""The lock file: ``recipes/<name>.lock.json`` next to each recipe, one entry per GPU arch set.

file.py     its format: where it lives, its arch keys, reading (always validated) and writing it
schema.py   what every entry may hold: a lock is a file in a repository (a pull request can change it),
            so each value is checked before anything renders, builds or resolves from it
drift.py    how a lock entry differs from the recipe, from rocmstack's own requirements, from a fresh closure

Below the resolver, render and rules: they import it, it imports only the recipe model.
"""
