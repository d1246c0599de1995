"""docs/walkthrough.md's clean-up removes every image tag the walkthrough made: the base it imports and each
tag its build printed (the descriptive tag, the content tag and the alias), not only the alias."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "walkthrough.md"


def _blocks() -> list[str]:
    part = DOC.read_text().split("<!-- walkthrough:begin -->", 1)[1].split("<!-- walkthrough:end -->", 1)[0]
    return re.findall(r"^```bash\n(.*?)^```$", part, flags=re.S | re.M)


def test_the_clean_up_removes_every_tag_the_walkthrough_made(tmp_path):
    steps = _blocks()
    imported = re.search(r"podman import - (\S+)", steps[1])
    assert imported
    (build,) = [line for line in steps[2].splitlines() if line.startswith("rocmstack build")]
    assert build.rstrip().endswith('| tee "$WALK/tags.txt"'), build  # the tags the build printed, kept
    (pushed,) = [line for line in steps[6].splitlines() if "rocmstack build" in line]
    assert pushed.rstrip().endswith('| tee -a "$WALK/tags.txt"'), pushed  # and those of the signed push
    (rmi,) = [line for line in steps[7].splitlines() if line.startswith("podman rmi")]
    assert '$(cat "$WALK/tags.txt")' in rmi and imported[1] in rmi, rmi
    # The build prints one ref per line, each tag it applied: the refs `rocmstack tags` gives for the same
    # recipe, arch and options.
    words = shlex.split(build.split("|", 1)[0])[2:]
    options = words[: words.index("--engine")]
    tags = run_cli("tags", *options)
    assert tags.code == 0, tags.err
    refs = [line.split("\t")[0] for line in tags.out.splitlines() if line.strip()]
    assert len(refs) == 3 and "localhost/rocmstack-test/tiny:tiny-latest" in refs, refs
