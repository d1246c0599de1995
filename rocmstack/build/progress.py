"""Follow an engine's build output line by line: which Dockerfile step runs, how long it took, cached or not.

Two output dialects:
  podman/buildah: ``STEP 4/21: RUN ...``, then ``--> Using cache <id>`` for a cache hit, ``--> <id>`` when
  committed, ``Error: building at STEP "RUN ...": ...`` on failure.
  docker buildx ``--progress=plain``: ``#7 [ 4/21] RUN ...``, then ``#7 CACHED`` or ``#7 DONE 3.2s`` or
  ``#7 ERROR: ...``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rocmstack.container.engine import STEP_PROGRESS
from rocmstack.render.run_form import SHELL

_PODMAN_STEP = re.compile(r"^STEP (\d+)/(\d+): (.*)$")
_PODMAN_CACHE = re.compile(r"^--> Using cache ([0-9a-f]+)")
_PODMAN_ERROR = re.compile(r'^Error: building at STEP "(.*)": (.*)$')
_BUILDX_STEP = re.compile(r"^#(\d+) \[(?:[\w.-]+ )?\s*(\d+)/(\d+)\] (.*)$")
_BUILDX_CACHED = re.compile(r"^#(\d+) CACHED\s*$")
_BUILDX_DONE = re.compile(r"^#(\d+) DONE ([0-9.]+)s\s*$")
_BUILDX_ERROR = re.compile(r"^#(\d+) ERROR: (.*)$")
# A RUN as the renderer writes it (exec form through bash -o pipefail), as the engines echo it: the array
# itself, or its words joined (podman's error line).
_EXEC_ARRAY = re.compile(
    r"^RUN ((?:--\S+ )*)\[" + re.escape(", ".join(json.dumps(w) for w in SHELL)) + r', (".*")\]$'
)
_EXEC_WORDS = re.compile(r"^RUN ((?:--\S+ )*)" + re.escape(" ".join(SHELL)) + r" (.*)$")


def shown(instruction: str) -> str:
    """The instruction as its Dockerfile reads to a person: a RUN's command, without the shell around it."""
    text = instruction.strip()
    if m := _EXEC_ARRAY.match(text):
        try:
            return f"RUN {m[1]}{json.loads(m[2])}"
        except json.JSONDecodeError:
            return text
    if m := _EXEC_WORDS.match(text):
        return f"RUN {m[1]}{m[2]}"
    return text


@dataclass(frozen=True, kw_only=True)
class Step:
    index: int
    total: int
    instruction: str
    seconds: float
    cached: bool
    failed: bool = False

    @property
    def keyword(self) -> str:
        return self.instruction.split(" ", 1)[0].upper()

    def as_dict(self) -> dict:
        return {
            "index": self.index,
            "total": self.total,
            "instruction": self.instruction,
            "seconds": round(self.seconds, 2),
            "cached": self.cached,
            "failed": self.failed,
        }


@dataclass(frozen=True, kw_only=True)
class Event:
    kind: str  # "start" | "end"
    step: Step


class StepTracker:
    """Feed it lines; it calls ``on_event`` when a step starts or ends and keeps the finished steps.

    Timing: podman prints no durations, so a step lasts from its STEP line to the next one (or the end).
    buildx prints ``DONE <seconds>`` itself.
    """

    def __init__(
        self,
        progress: str,
        on_event: Callable[[Event], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.progress = progress  # Engine.progress: STEP_PROGRESS, else BuildKit's plain lines
        self.steps: list[Step] = []
        self.failed_instruction: str | None = None
        self.error: str | None = None
        self._on_event = on_event or (lambda _e: None)
        self._clock = clock
        self._current: dict | None = None
        self._buildx_open: dict[str, dict] = {}

    # -- shared -----------------------------------------------------------------------------------
    def _start(self, index: int, total: int, instruction: str) -> dict:
        cur = {
            "index": index,
            "total": total,
            "instruction": shown(instruction),
            "t0": self._clock(),
            "cached": False,
        }
        self._on_event(Event(kind="start", step=self._as_step(cur, 0.0)))
        return cur

    def _as_step(self, cur: dict, seconds: float, failed: bool = False) -> Step:
        return Step(
            index=cur["index"],
            total=cur["total"],
            instruction=cur["instruction"],
            seconds=seconds,
            cached=cur["cached"],
            failed=failed,
        )

    def _finish(self, cur: dict, seconds: float | None = None, failed: bool = False) -> None:
        step = self._as_step(cur, self._clock() - cur["t0"] if seconds is None else seconds, failed)
        self.steps.append(step)
        self._on_event(Event(kind="end", step=step))

    # -- lines --------------------------------------------------------------------------------------
    def feed(self, line: str) -> None:
        line = line.rstrip("\n")
        if self.progress == STEP_PROGRESS:
            self._feed_podman(line)
        else:
            self._feed_buildx(line)

    def _feed_podman(self, line: str) -> None:
        if m := _PODMAN_STEP.match(line):
            if self._current:
                self._finish(self._current)
            self._current = self._start(int(m[1]), int(m[2]), m[3])
        elif _PODMAN_CACHE.match(line) and self._current:
            self._current["cached"] = True
        elif m := _PODMAN_ERROR.match(line):
            self.failed_instruction, self.error = shown(m[1]), m[2]

    def _feed_buildx(self, line: str) -> None:
        if m := _BUILDX_STEP.match(line):
            if m[1] not in self._buildx_open:
                self._buildx_open[m[1]] = self._start(int(m[2]), int(m[3]), m[4])
        elif (m := _BUILDX_CACHED.match(line)) and m[1] in self._buildx_open:
            cur = self._buildx_open.pop(m[1])
            cur["cached"] = True
            self._finish(cur, 0.0)
        elif (m := _BUILDX_DONE.match(line)) and m[1] in self._buildx_open:
            self._finish(self._buildx_open.pop(m[1]), float(m[2]))
        elif (m := _BUILDX_ERROR.match(line)) and m[1] in self._buildx_open:
            cur = self._buildx_open.pop(m[1])
            self.failed_instruction, self.error = cur["instruction"], m[2]
            self._finish(cur, failed=True)

    def close(self, ok: bool) -> None:
        """End of output: the open podman step ends here (failed if the build failed)."""
        if self._current:
            failed = not ok
            if failed and self.failed_instruction is None:
                self.failed_instruction = self._current["instruction"]
            self._finish(self._current, failed=failed)
            self._current = None
        for key in list(self._buildx_open):
            self._finish(self._buildx_open.pop(key), failed=not ok)

    # -- summary ------------------------------------------------------------------------------------
    def cache_counts(self) -> dict[str, int]:
        return cache_counts(self.steps)

    def failed_step(self) -> Step | None:
        return next((s for s in self.steps if s.failed), None)


def cache_counts(steps: Iterable[Step]) -> dict[str, int]:
    """Cache hits vs misses over the steps after FROM (FROM itself is neither)."""
    counted = [s for s in steps if s.keyword != "FROM" and not s.failed]
    hits = sum(1 for s in counted if s.cached)
    return {"hits": hits, "misses": len(counted) - hits}
