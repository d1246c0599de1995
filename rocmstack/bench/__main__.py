"""``python -m rocmstack.bench rollout ...``: the bench commands alone, without the other concerns' imports.

Same options, one-line errors and exit codes as ``rocmstack bench``."""

import sys

from rocmstack.cli import main

if __name__ == "__main__":
    main(["bench", *sys.argv[1:]], modules=("rocmstack.commands.bench",))
