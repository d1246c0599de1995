"""Resolve before you build: every Python package and git commit of an image, locked, diffed, kept current.

uv.py        the pip layers' closure for the image's platform, resolved by uv (cached)
git.py       git refs to commits (ls-remote) and requirement files at a commit
closure.py   a recipe's closure: commits + packages, moved only on --refresh
diff.py      what changed between two locks, recipes or images
freeze.py    base.provides read from a real image through the container engine

The lock file itself (format, validation, drift) is rocmstack.lock; ``outdated`` (which asks the rules
what a bump would do) is rocmstack.rules.outdated.
"""
