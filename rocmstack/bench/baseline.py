"""Per-arch baselines for `bench rollout`: store what a good image reached, gate on regressions.

A baseline file holds the decode rate (``decode_tokens_per_s``, the bench's headline) per (shape, engine,
batch, prompt_len, new_tokens, dtype) for one device kind. A run fails the gate when any matching config
falls more than `tolerance` below it. Files of schema 1 held the prefill-inclusive tokens/s instead: not
comparable with a decode rate, so they are refused with the command that records them again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rocmstack.bench.report import HEADLINE, BaselineVerdict
from rocmstack.errors import InputError, printable
from rocmstack.output import dumps
from rocmstack.status import Status, status_of

SCHEMA = 2
DEFAULT_TOLERANCE = 0.10
_KEY = ("shape", "engine", "batch", "prompt_len", "new_tokens", "dtype")
BASELINE_DIR = Path(__file__).parent / "baselines"


def _device_kind(report: Mapping[str, Any]) -> str:
    spec = report["device"].get("spec")
    return str(spec["name"] if spec else report["device"]["name"])


def _entries(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    shape, dtype = report["shape"]["name"], report["settings"]["dtype"]
    return [
        {
            "shape": shape,
            "engine": r["engine"],
            "batch": r["batch"],
            "prompt_len": r["prompt_len"],
            "new_tokens": r["new_tokens"],
            "dtype": dtype,
            HEADLINE: r[HEADLINE],
            "mbu": r["mbu"],
        }
        for r in report["results"]
        if r["status"] == Status.PASS and r[HEADLINE]  # an engine with no decode phase has no decode rate
    ]


def _key(entry: Mapping[str, Any]) -> tuple:
    return tuple(entry[k] for k in _KEY)


def update_baseline(
    path: Path, report: Mapping[str, Any], *, tolerance: float = DEFAULT_TOLERANCE
) -> dict[str, Any]:
    """Merge this report's results into the baseline file (same config: replaced)."""
    kind = _device_kind(report)
    if path.exists():
        data = load_baseline(path)
        if data["device"] != kind:
            raise InputError(
                f"{path}: baseline for {data['device']}, this run is on {kind}", fix="use another file"
            )
    else:
        data = {"schema": SCHEMA, "device": kind, "tolerance": tolerance, "entries": [], "sources": []}
    merged = {_key(e): e for e in data["entries"]}
    merged.update({_key(e): e for e in _entries(report)})
    data["entries"] = sorted(merged.values(), key=lambda e: tuple(str(v) for v in _key(e)))
    data["sources"].append(
        {"date": report["date"], "command": report["command"], "device_name": report["device"]["name"]}
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(data))
    return data


def load_baseline(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InputError(f"--baseline {path}: no such file", fix=f"ship one under {BASELINE_DIR}") from exc
    except ValueError as exc:  # bad JSON or bad UTF-8
        raise InputError(
            f"--baseline {path}: not JSON ({exc})", fix="pass a file written by --save-baseline"
        ) from exc
    if isinstance(data, dict) and data.get("schema") == 1 and type(data["schema"]) is int:
        raise InputError(
            f"--baseline {path}: schema 1 holds the prefill-inclusive tokens/s, and runs now compare the decode "
            "rate (decode_tokens_per_s)",
            fix="record it again on a good image with `rocmstack bench rollout ... --save-baseline NEW.json`; "
            "the file's sources list the commands that made it",
        )
    if (
        not isinstance(data, dict)
        or data.get("schema") != SCHEMA
        or not isinstance(data.get("entries"), list)
    ):
        raise InputError(
            f"--baseline {path}: not a rocmstack bench baseline (schema {SCHEMA})", fix="use --save-baseline"
        )
    for i, entry in enumerate(data["entries"]):
        missing = [k for k in (*_KEY, HEADLINE) if not isinstance(entry, dict) or k not in entry]
        if missing:
            raise InputError(
                f"--baseline {path}: entries[{i}] lacks {', '.join(missing)}", fix="regenerate the file"
            )
        rate = entry[HEADLINE]
        if type(rate) not in (int, float) or not rate > 0:  # a ratio divides by it
            raise InputError(
                f"--baseline {path}: entries[{i}].{HEADLINE} = {printable(repr(rate))} is not a positive rate",
                fix="regenerate the file with --save-baseline",
            )
    return data


def compare(
    report: Mapping[str, Any], baseline: Mapping[str, Any], *, tolerance: float | None = None
) -> dict[str, Any]:
    """Each result with a baseline entry: a pass when its decode rate >= baseline x (1 - tolerance)."""
    kind = _device_kind(report)
    if baseline["device"] != kind:
        raise InputError(
            f"baseline is for {baseline['device']}, this device is {kind}",
            fix=f"pass the baseline for {kind}, or record one with --save-baseline",
        )
    tol = baseline.get("tolerance", DEFAULT_TOLERANCE) if tolerance is None else tolerance
    stored = {_key(e): e for e in baseline["entries"]}
    checks = []
    for entry in _entries(report):
        ref = stored.get(_key(entry))
        if ref is None:
            continue
        ratio = entry[HEADLINE] / ref[HEADLINE]
        checks.append(
            {
                **{k: entry[k] for k in _KEY},
                "metric": HEADLINE,
                f"baseline_{HEADLINE}": ref[HEADLINE],
                HEADLINE: entry[HEADLINE],
                "ratio": ratio,
                "status": status_of(ratio >= 1.0 - tol),
            }
        )
    verdict = {
        "device": kind,
        "tolerance": tol,
        "checks": checks,
        "passed": all(c["status"] == Status.PASS for c in checks) and bool(checks),
    }
    return BaselineVerdict.produce(verdict).wire()
