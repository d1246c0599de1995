"""``python -m rocmstack.doctor``: the doctor alone, for images where only this concern matters.

Same options, one-line errors and exit codes as ``rocmstack doctor``."""

import sys

from rocmstack.cli import main

if __name__ == "__main__":
    main(["doctor", *sys.argv[1:]], modules=("rocmstack.commands.doctor",))
