"""Resolve before you build: every Python package and git commit of an image, locked, diffed, kept current.

uv.py        the pip layers' closure for the image's platform, resolved by uv (cached)
git.py       git refs to commits (ls-remote) and requirement files at a commit
closure.py   a recipe's closure: commits + packages, moved only on --refresh; drift against a lock
diff.py      what changed between two locks, recipes or images
outdated.py  newest upstream release per pin and what check says with it
freeze.py    base.provides read from a real image through the container engine
"""
