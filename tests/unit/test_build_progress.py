"""Step tracking from real engine output: which step, cached or not, how long, which one failed."""

from __future__ import annotations

import itertools

from rocmstack.build.progress import StepTracker
from rocmstack.container.engine import BUILDKIT_PROGRESS, STEP_PROGRESS

# Verbatim: podman 4.3.1 on this machine (2026-11-29), `podman --storage-driver vfs build --format docker
# --isolation chroot --layers ...`, second build after changing `ENV A=1` to `ENV A=2`.
PODMAN_REBUILD = """\
STEP 1/8: FROM localhost/rstest-base:bookworm
STEP 2/8: SHELL ["/bin/bash", "-o", "pipefail", "-c"]
--> Using cache a8be9e143dae2aef0d812bb5dfe9d3485d3cd7f7bf3eb3c404b930b5a74cda7d
--> a8be9e143da
STEP 3/8: ENV A=2
--> 5750596eacc
STEP 4/8: RUN --mount=type=cache,target=/root/.cache/pip python3 -m pip install iniconfig==2.0.0
Collecting iniconfig==2.0.0
  Downloading iniconfig-2.0.0-py3-none-any.whl (5.9 kB)
Installing collected packages: iniconfig
Successfully installed iniconfig-2.0.0
--> e5c9335ffec
STEP 5/8: ARG ROCMSTACK_REVISION=unknown
--> dcdc51551a0
STEP 6/8: LABEL org.opencontainers.image.revision="${ROCMSTACK_REVISION}"
--> 2bb2b99daeb
STEP 7/8: RUN python3 -c "import iniconfig; print(iniconfig.__file__)"
/usr/local/lib/python3.11/dist-packages/iniconfig/__init__.py
--> 001d5a269be
STEP 8/8: LABEL "org.opencontainers.image.source"="https://x.y/z"
COMMIT
--> 932ad5181e9
932ad5181e9ea59c6ed998904a90c633e7a4e08bfbab3af0b26ce1cca6d73ad3
"""

# Verbatim: the same podman, a RUN step failing (pip could not verify PyPI's certificate).
PODMAN_FAILURE = """\
STEP 1/8: FROM localhost/rstest-base:bookworm
STEP 2/8: SHELL ["/bin/bash", "-o", "pipefail", "-c"]
--> b809b6daf05
STEP 3/8: ENV A=1
--> 5b3c06f4f46
STEP 4/8: RUN --mount=type=cache,target=/root/.cache/pip python3 -m pip install iniconfig==2.0.0
ERROR: Could not find a version that satisfies the requirement iniconfig==2.0.0 (from versions: none)
ERROR: No matching distribution found for iniconfig==2.0.0
subprocess exited with status 1
subprocess exited with status 1
Error: building at STEP "RUN --mount=type=cache,target=/root/.cache/pip python3 -m pip install iniconfig==2.0.0": exit status 1
"""

# Verbatim lines of `docker buildx build --progress=plain` from public threads:
#   https://github.com/docker/buildx/issues/293 (GitHub Actions timestamps removed)
#   https://github.com/docker/build-push-action/issues/885
BUILDX = """\
#11 transferring context: 195.08kB 0.0s done
#11 DONE 0.0s

#12 [prep 2/3] COPY . /src
#12 CACHED

#13 [prep 3/3] RUN mkdir ./proj && cd ./src &&   find . -type f -a ( -iname ...
#13 CACHED

#17 [10/11] RUN chmod 700 node_modules/puppeteer/.local-chromium/linux-*/chrome-linux/chrome
#17 extracting sha256:35eb1fdebbb4820d0127f245e009a1f43bf2d27e28dce06f10a72fe72dbc7698 2.3s done
#17 DONE 50.1s
"""


def fake_clock():
    ticks = itertools.count(0.0, 1.5)
    return lambda: next(ticks)


def run(progress, text, ok=True):
    events = []
    tracker = StepTracker(progress, events.append, clock=fake_clock())
    for line in text.splitlines():
        tracker.feed(line)
    tracker.close(ok)
    return tracker, events


def test_podman_cache_hits_and_misses():
    tracker, events = run(STEP_PROGRESS, PODMAN_REBUILD)
    assert [s.index for s in tracker.steps] == list(range(1, 9))
    assert [s.cached for s in tracker.steps] == [False, True, False, False, False, False, False, False]
    assert tracker.cache_counts() == {"hits": 1, "misses": 6}  # FROM counts as neither
    assert all(s.seconds > 0 for s in tracker.steps)
    assert [e.kind for e in events[:3]] == ["start", "end", "start"]
    assert tracker.steps[3].keyword == "RUN" and tracker.failed_step() is None


def test_podman_failure_names_the_step():
    tracker, _ = run(STEP_PROGRESS, PODMAN_FAILURE, ok=False)
    failed = tracker.failed_step()
    assert failed.index == 4 and "iniconfig==2.0.0" in failed.instruction
    assert tracker.failed_instruction.startswith("RUN --mount=type=cache")
    assert tracker.error == "exit status 1"
    assert tracker.cache_counts() == {"hits": 0, "misses": 2}


def test_buildx_plain_progress():
    tracker, _ = run(BUILDKIT_PROGRESS, BUILDX)
    by_index = {(s.index, s.total): s for s in tracker.steps}
    assert by_index[(2, 3)].cached and by_index[(3, 3)].cached
    assert not by_index[(10, 11)].cached and by_index[(10, 11)].seconds == 50.1
    assert "[internal]" not in " ".join(s.instruction for s in tracker.steps)
    assert tracker.cache_counts() == {"hits": 2, "misses": 1}


def test_interrupted_buildx_step_is_closed_as_failed():
    tracker, _ = run(BUILDKIT_PROGRESS, "#5 [ 4/21] RUN python3 -m pip install x\n", ok=False)
    assert tracker.failed_step().index == 4


# Verbatim: podman 4.3.1 (Debian bookworm, --format oci) building exec-form RUNs as rocmstack renders them.
PODMAN_EXEC_FORM = """\
STEP 1/4: FROM localhost/rocmstack-test-base:bookworm
STEP 2/4: ARG X=1
--> 88911521811
STEP 3/4: RUN --mount=type=cache,target=/root/.cache/pip ["/bin/bash", "-o", "pipefail", "-c", "echo \\"a $X\\" > /a  && echo b >> /a  && cat /a"]
a 1
b
--> dd69b4a5ba4
STEP 4/4: RUN ["/bin/bash", "-o", "pipefail", "-c", "false | true"]
subprocess exited with status 1
subprocess exited with status 1
Error: building at STEP "RUN /bin/bash -o pipefail -c false | true": exit status 1
"""


def test_an_exec_form_run_shows_the_command_it_runs():
    tracker, _ = run(STEP_PROGRESS, PODMAN_EXEC_FORM, ok=False)
    assert [s.instruction for s in tracker.steps][2:] == [
        'RUN --mount=type=cache,target=/root/.cache/pip echo "a $X" > /a  && echo b >> /a  && cat /a',
        "RUN false | true",
    ]
    assert tracker.failed_instruction == "RUN false | true" and tracker.error == "exit status 1"
