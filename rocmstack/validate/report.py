"""The validation report in three forms: report.json (schema rocmstack.validate/2), report.md (CI job
summary) and report.html (one self-contained file: inline CSS, plots as inline base64 PNGs, no script,
nothing fetched)."""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path
from typing import Any

from rocmstack.bench.report import HEADLINE, check_rates
from rocmstack.contract import PROVENANCE_PREFIXES, RECIPE_LABEL
from rocmstack.errors import InputError, printable
from rocmstack.output import dumps
from rocmstack.redact import scrub, secret_values
from rocmstack.smoke.config import throughput_unit
from rocmstack.smoke.report import PLOTS
from rocmstack.validate.schema import (
    BENCH_DIR,
    FAIL,
    PASS,
    REPORT_HTML,
    REPORT_JSON,
    REPORT_LIMIT,
    REPORT_MD,
    ROOFLINE_PNG,
    SMOKE_DIR,
    parse_report,
)

# The smoke's plot files, in the order it writes them, with their captions here.
SMOKE_PLOTS = tuple(
    zip(PLOTS, ("GRPO reward", "train vs rollout log-prob difference", "phase times per step"), strict=True)
)
MAX_DEPTH = 64  # a report rocmstack writes nests about 8 deep
_MARK = {
    "pass": "PASS",
    "fail": "FAIL",
    "error": "ERROR",
    "skip": "skip",
    "warn": "WARN",
}


def write_all(report: dict[str, Any], directory: Path) -> list[Path]:
    import os

    # Stage errors and tool output can echo a token from the environment: scrub the whole report.
    report = scrub(report, secret_values(os.environ))
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / REPORT_JSON, directory / REPORT_MD, directory / REPORT_HTML]
    paths[0].write_text(dumps(report), encoding="utf-8")
    paths[1].write_text(render_markdown(report), encoding="utf-8")
    paths[2].write_text(render_html(report, directory), encoding="utf-8")
    return paths


def load(directory: Path) -> dict[str, Any]:
    """report.json from DIR, read within its size limit and checked against the schema; InputError names
    what is wrong (the file may come from an image or an artifact: nothing in it is trusted)."""
    path = directory / REPORT_JSON
    try:
        with open(path, "rb") as f:
            data = f.read(REPORT_LIMIT + 1)
        if len(data) > REPORT_LIMIT:
            raise InputError(
                f"--reports {directory}: {REPORT_JSON} is larger than {REPORT_LIMIT:,} bytes",
                fix="pass the folder `rocmstack validate IMAGE --output DIR` wrote",
            )
        report = json.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise InputError(
            f"--reports {directory}: no {REPORT_JSON} in it",
            fix="pass the folder `rocmstack validate IMAGE --output DIR` wrote",
        ) from None
    except RecursionError:  # JSON nested deeper than the parser goes: no report rocmstack writes
        raise InputError(
            f"--reports {directory}: {REPORT_JSON} is not readable JSON (nested too deep)",
            fix="run `rocmstack validate` again",
        ) from None
    except (OSError, ValueError) as exc:  # ValueError: bad JSON or bad UTF-8
        raise InputError(
            f"--reports {directory}: {REPORT_JSON} is not readable JSON ({printable(exc)})",
            fix="run `rocmstack validate` again",
        ) from None
    if _nested_deeper(report, MAX_DEPTH):
        raise InputError(
            f"--reports {directory}: {REPORT_JSON} is nested deeper than {MAX_DEPTH} levels",
            fix="run `rocmstack validate` again",
        )
    return parse_report(report, f"--reports {directory}: {REPORT_JSON}")


def _nested_deeper(value: Any, limit: int) -> bool:
    """Whether VALUE nests lists/objects deeper than LIMIT; iterative, so depth itself cannot crash it.
    What reads the report afterwards (scrub, the renderers, json.dumps) recurses."""
    todo = [(value, 0)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, dict | list):
            if depth >= limit:
                return True
            todo.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return False


def _num(value: Any, spec: str) -> str:
    """A number formatted; anything else (the in-image report is untrusted: a string, a bool) is "-"."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    return format(value, spec)


def _md(text: Any) -> str:
    """One table cell of GitHub markdown: no line break, no pipe, no HTML (job summaries render tags), no
    terminal escape (the file is also read with cat)."""
    line = printable(str(text).replace("\r", " ").replace("\n", " "))
    return html.escape(line).replace("|", "\\|").replace("`", "\\`")


def _image_title(report: dict[str, Any]) -> str:
    img = report.get("image") or {}
    return img.get("ref") or img.get("labels", {}).get(RECIPE_LABEL) or "this node (in place)"


def _labels(report: dict[str, Any]) -> dict[str, str]:
    labels = (report.get("image") or {}).get("labels") or {}
    return {k: v for k, v in sorted(labels.items()) if k.startswith(PROVENANCE_PREFIXES)}


def render_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"## rocmstack validate: {'PASS' if report['passed'] else 'FAIL'}",
        "",
        f"**{_md(report['verdict'])}**",
        "",
        f"- image: {_md(_image_title(report))}",
        f"- render hash: {_md(report.get('render_hash') or 'unknown')}",
        f"- mode: {_md(report['mode'])}"
        + (f" ({_md(report['engine']['engine'])})" if report.get("engine") else ""),
        f"- host: {_md(report['host'].get('hostname'))} ({_md(report['host'].get('platform'))})",
        f"- created: {_md(report['created'])}",
        "",
        "| stage | status | seconds | summary |",
        "| --- | --- | ---: | --- |",
    ]
    for s in report["stages"]:
        lines.append(
            f"| {_md(s['name'])} | {_md(_mark(s['status']))} | {_num(s['seconds'], '.1f')} | {_md(s['summary'])} |"
        )
    doctor = (report.get("doctor") or {}).get("report")
    if doctor:
        lines += ["", "### doctor", "", "| check | status | result |", "| --- | --- | --- |"]
        for c in doctor.get("checks", []):
            text = f"{c['summary']}" + (
                f" (fix: {c['fix']})" if c.get("fix") and c["status"] != "pass" else ""
            )
            lines.append(f"| {_md(c['id'])} | {_md(_mark(c['status']))} | {_md(text)} |")
    smoke = (report.get("smoke") or {}).get("summary")
    if smoke:
        lines += ["", "### GRPO smoke", "", "| criterion | result | detail |", "| --- | --- | --- |"]
        for c in smoke["criteria"]:
            lines.append(f"| {_md(c['name'])} | {_md(_mark(c['status']))} | {_md(c['detail'])} |")
    bench = (report.get("bench") or {}).get("report")
    if bench:
        lines += [
            "",
            f"### rollout bench ({_md(bench['shape']['name'])} on {_md(bench['device']['name'])})",
            "",
            "| engine | batch | decode tok/s | MBU | roofline tok/s | baseline decode tok/s | ratio |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r, b in _bench_rows(bench):
            lines.append(
                f"| {_md(r['engine'])} | {_num(r['batch'], '')} | {_num(r.get('decode_tokens_per_s'), ',.1f')} | "
                f"{_num(r.get('mbu'), '.3f')} | {_num(r.get('roofline_tokens_per_s'), ',.0f')} | "
                f"{_md(_baseline_rate(b))} | {_num(b and b['ratio'], '.2f')} |"
            )
    return "\n".join(lines) + "\n"


def _baseline_rate(check: dict[str, Any] | None) -> str:
    """The baseline's rate of a check, said as what it is: a report of bench schema 1 or 2 compared the
    prefill-inclusive rate, never shown as a decode rate."""
    if check is None:
        return "-"
    text = _num(check_rates(check)[1], ",.1f")
    return text if check["metric"] == HEADLINE else f"{text} (whole run, old report)"


def _bench_rows(bench: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    checks = {(c["engine"], c["batch"]): c for c in (bench.get("baseline") or {}).get("checks", [])}
    return [(r, checks.get((r["engine"], r["batch"]))) for r in bench["results"]]


def png_data_uri(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:24px;color:#1d1d1f;
background:#fff;max-width:1150px}
h1{font-size:22px;margin:0 0 8px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.verdict{font-size:20px;font-weight:700;padding:12px 16px;border-radius:6px;margin:12px 0}
.verdict.pass{background:#e3f6e5;color:#11631b;border:1px solid #8fd19a}
.verdict.fail{background:#fde7e7;color:#8a1010;border:1px solid #f09a9a}
table{border-collapse:collapse;width:100%;font-size:13px;margin:6px 0}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
.s-pass{color:#11631b;font-weight:600}.s-fail,.s-error{color:#b00020;font-weight:700}
.s-warn{color:#9a6700;font-weight:600}.s-skip,.s-skipped,.s-na{color:#777}
.fix{color:#555;font-size:12px}code{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px}
.plots{display:flex;flex-wrap:wrap;gap:12px}.plots figure{margin:0}
.plots img{max-width:540px;border:1px solid #eee}.plots img.wide{max-width:100%}
figcaption{font-size:12px;color:#555}dl{display:grid;grid-template-columns:max-content auto;gap:2px 14px;font-size:13px}
dt{font-weight:600}dd{margin:0;word-break:break-all}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else printable(value))


def _mark(status: Any) -> str:
    return _MARK.get(status, str(status)) if isinstance(status, str) else str(status)


def _status_cell(status: Any) -> str:
    # The class is one of ours or none: a value from the report never becomes markup.
    cls = f' class="s-{status}"' if status in _MARK else ""
    return f"<td{cls}>{_e(_mark(status))}</td>"


def _figure(uri: str | None, caption: str, alt: str, wide: bool = False) -> str:
    if uri is None:
        return ""
    cls = ' class="wide"' if wide else ""
    return f'<figure><img{cls} src="{uri}" alt="{_e(alt)}"><figcaption>{_e(caption)}</figcaption></figure>'


def render_html(report: dict[str, Any], directory: Path) -> str:
    ok = report["passed"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>rocmstack validate: {'PASS' if ok else 'FAIL'}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>rocmstack validate &mdash; {_e(_image_title(report))}</h1>",
        f'<div class="verdict {"pass" if ok else "fail"}" id="verdict">{_e(report["verdict"])}</div>',
    ]
    engine = report.get("engine")
    facts = [
        ("render hash", report.get("render_hash") or "unknown"),
        ("mode", report["mode"] + (f" via {engine['engine']}" if engine else "")),
        ("image id", (report.get("image") or {}).get("id")),
        (
            "host",
            f"{report['host'].get('hostname')} ({report['host'].get('platform')}, "
            f"{report['host'].get('cpus')} CPUs)",
        ),
        ("created", report["created"]),
        ("rocmstack", report.get("rocmstack_version")),
        ("duration", f"{_num(report['seconds'], '.1f')} s"),
    ]
    parts.append("<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts if v) + "</dl>")
    if engine:
        cmds = "<br>".join(_e(" ".join(c)) for c in engine.get("commands", []))
        parts.append(f"<p>engine command:<br><code>{cmds}</code></p>")

    parts.append(
        '<h2>Stages</h2><table id="stages"><tr><th>stage</th><th>status</th><th>seconds</th><th>summary</th></tr>'
    )
    for s in report["stages"]:
        parts.append(
            f"<tr><td>{_e(s['name'])}</td>{_status_cell(s['status'])}"
            f"<td class=num>{_num(s['seconds'], '.1f')}</td><td>{_e(s['summary'])}</td></tr>"
        )
    parts.append("</table>")

    doctor = (report.get("doctor") or {}).get("report")
    if doctor:
        parts.append(
            f'<h2>Doctor</h2><p>{_e(doctor.get("verdict"))}</p><table id="doctor">'
            "<tr><th>group</th><th>check</th><th>status</th><th>result</th></tr>"
        )
        for c in doctor.get("checks", []):
            fix = (
                f'<div class="fix">fix: {_e(c["fix"])}</div>'
                if c.get("fix") and c["status"] != "pass"
                else ""
            )
            parts.append(
                f"<tr><td>{_e(c.get('group'))}</td><td>{_e(c['id'])}</td>{_status_cell(c['status'])}"
                f"<td>{_e(c['summary'])}{fix}</td></tr>"
            )
        parts.append("</table>")

    smoke = (report.get("smoke") or {}).get("summary")
    if smoke:
        f = smoke["final"]
        parts.append(
            f"<h2>GRPO smoke</h2><p>{_e(smoke.get('placement'))} on {_e(smoke.get('device'))} "
            f"({_e(smoke.get('dtype'))}, "
            f"shape {_e(smoke.get('shape'))}, {_num(smoke.get('params'), ',')} params), {_num(smoke.get('steps'), '')} "
            "steps: reward "
            f"{_num(f.get('reward_first_window'), '.3f')} &rarr; {_num(f.get('reward_last_window'), '.3f')}, "
            f"{_num(f.get('tokens_per_gpu_per_sec_avg'), ',.0f')} {throughput_unit(smoke.get('device'))}, "
            "time to verdict "
            f"{_num(smoke.get('time_to_verdict_s'), '.1f')} s</p>"
        )
        parts.append('<table id="smoke"><tr><th>criterion</th><th>result</th><th>detail</th></tr>')
        for c in smoke["criteria"]:
            parts.append(
                f"<tr><td>{_e(c['name'])}</td>{_status_cell(c['status'])}<td>{_e(c['detail'])}</td></tr>"
            )
        parts.append('</table><div class="plots">')
        for name, caption in SMOKE_PLOTS:
            parts.append(_figure(png_data_uri(directory / SMOKE_DIR / name), caption, f"smoke {name}"))
        parts.append("</div>")

    bench = (report.get("bench") or {}).get("report")
    if bench:
        dev = bench["device"]
        parts.append(
            f"<h2>Rollout bench</h2><p>{_e(bench['shape']['name'])} on {_e(dev['name'])} ({_e(dev.get('backend'))}), "
            f"prompt {_num(bench['settings'].get('prompt_len'), '')}, {_num(bench['settings'].get('new_tokens'), '')} "
            f"new tokens, {_e(bench['settings'].get('dtype'))}; measured copy bandwidth "
            f"{_num(dev.get('copy_bandwidth_gb_s'), ',.0f')} GB/s</p>"
        )
        parts.append(
            '<table id="bench"><tr><th>engine</th><th>batch</th><th>status</th><th>decode tok/s</th><th>MBU</th>'
            "<th>roofline tok/s</th><th>baseline decode tok/s</th><th>ratio</th></tr>"
        )
        for r, b in _bench_rows(bench):
            status = PASS if r["status"] == PASS and (b is None or b["status"] == PASS) else FAIL
            parts.append(
                f"<tr><td>{_e(r['engine'])}</td><td class=num>{_num(r['batch'], '')}</td>{_status_cell(status)}"
                f"<td class=num>{_num(r.get('decode_tokens_per_s'), ',.1f')}</td>"
                f"<td class=num>{_num(r.get('mbu'), '.3f')}</td>"
                f"<td class=num>{_num(r.get('roofline_tokens_per_s'), ',.0f')}</td>"
                f"<td class=num>{_e(_baseline_rate(b))}</td>"
                f"<td class=num>{_num(b and b['ratio'], '.2f')}</td></tr>"
            )
        parts.append('</table><div class="plots">')
        parts.append(
            _figure(
                png_data_uri(directory / BENCH_DIR / ROOFLINE_PNG),
                "decode tokens/s and MBU vs the roofline",
                "roofline plot",
                wide=True,
            )
        )
        parts.append("</div>")

    labels = _labels(report)
    if labels:
        parts.append('<h2>Image labels</h2><table id="labels"><tr><th>label</th><th>value</th></tr>')
        parts += [f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in labels.items()]
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
