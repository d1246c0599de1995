"""What a run's own log says: every backend and kernel the engine selected, and, when it failed, which
process failed and its last error lines.

The categories and their patterns are data (engine_log.yaml), read against the engines' verbatim log
lines; any other ``Using ...`` line an engine prints is kept too, so a selection nobody listed is still
reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from rocmstack.errors import printable

PATTERNS = Path(__file__).with_name("engine_log.yaml")
MESSAGE_LINES = 4  # lines of an exception's message kept after its first
# "(EngineCore pid=1872) INFO ..." (vLLM's engine core), "(TaskRunnerV1 pid=8235) ..." (a Ray actor), with
# Ray's colour codes around the prefix
_PROCESS = re.compile(r"^(?:\x1b\[[0-9;]*m)?\((?P<name>[A-Za-z_][\w.:-]*)(?: pid=(?P<pid>\d+))?[^)]*\)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ERROR = re.compile(
    r"^(?:Traceback \(most recent call last\)|(?:ERROR|CRITICAL)\b|Segmentation fault|Fatal Python error|"
    r".*core dumped)"
)
# "ERROR 12-04 23:34:18 [multiproc_executor.py:953] ", "INFO 12-01 20:13:07 [cuda.py:480] "
_LOG_PREFIX = re.compile(
    r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s?"
)
# an exception as Python prints its last line: "ValueError: ...", "torch.OutOfMemoryError: ..."
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b(?::|$)")
_USING = re.compile(r"\bUsing\b\s+(?P<what>.{3,160})")
# Ray prints a remote task's traceback inside the caller's exception: "ray.exceptions.RayTaskError:
# ray::vLLMHttpServer.launch_server() (pid=12072, ...)", the failing actor's traceback, its exception last
_RAY_TASK = re.compile(r"RayTaskError\b.*?ray::(?P<name>[A-Za-z_]\w*)(?:\.\w+)*\(\)\s*\(pid=(?P<pid>\d+)")


@dataclass(frozen=True)
class Selection:
    category: str  # attention, moe, gemm, quantization, all-reduce, sampler, compile, other
    text: str  # the engine's own words
    process: str  # who said it: "EngineCore pid=1872", "main"


@dataclass(frozen=True)
class Failure:
    process: str  # the process that broke first
    lines: tuple[str, ...]  # its last error lines, verbatim (printable)
    then: str | None = None  # the log's last error line, where another process said it

    @property
    def cause(self) -> str | None:
        """The exception's own line (``ValueError: ...``) and its message, or None when none was raised."""
        for k in range(len(self.lines) - 1, -1, -1):
            if _RAISED.match(self.lines[k]):
                return " ".join(line.strip() for line in self.lines[k:])[:300]
        return None


@lru_cache(maxsize=1)
def _categories() -> tuple[tuple[str, re.Pattern[str]], ...]:
    data = yaml.safe_load(PATTERNS.read_text(encoding="utf-8"))
    return tuple((row["category"], re.compile(row["pattern"])) for row in data["selections"])


def _process(line: str) -> tuple[str, str]:
    """(who printed the line, the line without the prefix)."""
    found = _PROCESS.match(line)
    if not found:
        return "main", _ANSI.sub("", line)
    who = found.group("name") + (f" pid={found.group('pid')}" if found.group("pid") else "")
    return who, _ANSI.sub("", line[found.end() :]).strip()


def _speaker(line: str) -> tuple[str, str]:
    """``_process`` through a worker's prefix inside its parent's: vLLM's ``(Worker pid=8894)`` inside Ray's
    ``(vLLMHttpServer pid=8732)`` is the worker's line."""
    who, rest = _process(line)
    if _PROCESS.match(rest):
        who, rest = _process(rest)
    return who, rest


# a progress bar's moving part: "DeepGEMM warmup:  54%|#####     | 272/503 [00:46<00:15, 15.13it/s]"
_PROGRESS = re.compile(r":?\s*\d{1,3}%\|.*$")
# a printed config (verl prints its whole Hydra config as a Python dict: "'sampler': {...},")
_DUMP = re.compile(r"""^\s*(?:['"{\[]|\w+=\w+\()""")


def _said(text: str) -> list[tuple[str, str]]:
    """(who, what) for each line and each redraw of a progress bar (``\r``) on it, said by the process whose
    prefix began the line (Ray's coloured ``(vLLMHttpServer pid=N)``, an engine's ``(Worker pid=N)`` inside
    it) unless the redraw carries its own."""
    out: list[tuple[str, str]] = []
    for line in text.split("\n"):
        who = "main"
        for k, part in enumerate(line.split("\r")):
            if k == 0 or _PROCESS.match(part):
                who, part = _speaker(part)
            else:
                part = _ANSI.sub("", part)
            if part.strip():
                out.append((who, part.strip()))
    return out


def selections(text: str) -> list[Selection]:
    """Every selection the log names, in order, each once per process (a progress bar once, as its label)."""
    out: list[Selection] = []
    seen: set[tuple[str, str]] = set()
    for who, said_line in _said(text):
        if _DUMP.match(said_line):
            continue
        line = _PROGRESS.sub("", said_line)
        category = next((name for name, pattern in _categories() if pattern.search(line)), None)
        if category is None and _USING.search(line) and re.search(r"\b(?:INFO|WARNING)\b", line):
            category = "other"
        if category is None or "with config:" in line:  # vLLM's whole-config dump names every knob
            continue
        said = printable(re.sub(r"^.*?\[[\w.]+:\d+\]\s*", "", line))[
            :240
        ]  # drop "INFO 12-01 20:13:07 [x.py:1]"
        # a bar's redraws continue under the outer prefix alone (Ray prefixes each line it forwards): one bar
        key = ("", said) if line != said_line else (who.split(" pid=")[0], said)
        if key in seen:
            continue
        seen.add(key)
        out.append(Selection(category, said, who))
    return out


def _bare(line: str) -> str:
    """A line without a logger's "ERROR 12-04 23:34:18 [file.py:953] " prefix."""
    return _LOG_PREFIX.sub("", line)


def failure(text: str, keep: int = 12) -> Failure | None:
    """Where the run first broke: the process of the log's first raised exception (a root cause comes before
    the errors it sets off in the processes that waited on it), with its traceback's last lines, and the
    log's last error line when another process said it. None when the log holds no error."""
    parsed = [_speaker(line) for line in text.splitlines()]
    raised = [i for i, (_, line) in enumerate(parsed) if _RAISED.match(_bare(line))]
    errors = [i for i, (_, line) in enumerate(parsed) if _ERROR.search(line)]
    if not raised and not errors:
        return None
    at = raised[0] if raised else errors[-1]
    who = parsed[at][0]
    mine = [(i, _bare(line)) for i, (p, line) in enumerate(parsed[: at + 1]) if p == who]
    start = next(
        (k for k in range(len(mine) - 1, -1, -1) if "Traceback" in mine[k][1]), max(len(mine) - keep, 0)
    )
    block = [printable(line)[:400] for _, line in mine[start:]]
    if _RAY_TASK.search(parsed[at][1]):
        # a Ray task's error carries its cause's traceback: the failing actor is the chain's last task, and
        # its own exception is the chain's last one
        chain = [at]
        for i in range(at + 1, len(parsed)):
            if parsed[i][0] != who or _LOG_PREFIX.match(parsed[i][1]) or parsed[i][1].startswith("Traceback"):
                break
            chain.append(i)
        tasks = [i for i in chain if _RAY_TASK.search(parsed[i][1])]
        found = _RAY_TASK.search(parsed[tasks[-1]][1])
        who = f"{found.group('name')} pid={found.group('pid')}" if found else who
        inner = [i for i in chain if i > tasks[-1] and _RAISED.match(_bare(parsed[i][1]))]
        at = inner[-1] if inner else tasks[-1]
        block = [printable(_bare(parsed[i][1]))[:400] for i in range(tasks[-1], at + 1)]
        raised = []  # the chain is the log's last error: no other process said a later one
    # the exception's message may go on (pydantic's "1 validation error for X" names the field below it)
    for who_next, line in parsed[at + 1 : at + 1 + MESSAGE_LINES]:
        if who_next != parsed[at][0] or not line.strip() or _LOG_PREFIX.match(line) or _RAISED.match(line):
            break
        if line.startswith("Traceback"):
            break
        block.append(printable(line)[:400])
    tail = tuple(block if len(block) <= keep else [block[0], "...", *block[-(keep - 2) :]])
    last = raised[-1] if raised else at
    then = None
    if parsed[last][0] != who and last != at:
        then = f"{parsed[last][0]}: {printable(_bare(parsed[last][1]))[:300]}"
    return Failure(who, tail, then)


def where_it_broke(text: str) -> Failure | None:
    """Where a run that ended badly broke: its first failure, or, with no error in the log (a time limit, a
    silent exit), what it was doing at its end. None for an empty log."""
    return failure(text) or log_end(text)


def log_end(text: str, keep: int = 8) -> Failure | None:
    """What the step was doing when it stopped without an error (a time limit): the log's last lines, each
    redraw of a progress bar (``\r``) on its own and said by the process whose prefix began its line (Ray's
    coloured ``(vLLMHttpServer pid=N)``, an engine's ``(Worker pid=N)`` inside it); the process is the last
    line's. None for an empty log."""
    said = _said(text)
    if not said:
        return None
    tail = said[-keep:]
    return Failure(
        tail[-1][0], tuple(printable(f"{w}: {line}" if w != "main" else line)[:400] for w, line in tail)
    )
