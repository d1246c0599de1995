"""``--html FILE``: the doctor report as one self-contained HTML page: the verdict, every check, the trend
against the previous run (--history), and for a burn-in one plot per GPU (rate per window; clock, power and
temperature over the run), embedded as PNG. Values from the report are escaped; nothing is fetched."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

from rocmstack.doctor.report import trend_rows
from rocmstack.errors import InputError

_CSS = (
    "body{font-family:system-ui,sans-serif;margin:24px;max-width:1150px;color:#1d1d1f}"
    "table{border-collapse:collapse;width:100%;font-size:13px}th,td{border:1px solid #ddd;padding:4px 8px;"
    "text-align:left;vertical-align:top}th{background:#f4f4f6}.pass{color:#11631b}.fail,.error{color:#b00020;"
    "font-weight:700}.warn{color:#9a6700}.skip{color:#777}figure{margin:8px 0}img{max-width:100%;"
    "border:1px solid #eee}figcaption{font-size:12px;color:#555}"
)


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def gpu_plot(burn: dict, index: int) -> bytes:
    """PNG: this GPU's GEMM/HBM rate per window (top) and its telemetry over the run (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gpu = burn["gpus"][index]
    windows = gpu.get("windows") or []
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    xs = [w["t"] / 60 for w in windows]
    top.plot(xs, [w["gemm_tflops"] for w in windows], marker="o", color="C0", label="bf16 GEMM (TFLOPS)")
    top.set_ylabel("TFLOPS")
    hbm = top.twinx()
    hbm.plot(xs, [w["hbm_gbs"] for w in windows], marker="s", color="C1", label="HBM copy (GB/s)")
    hbm.set_ylabel("GB/s")
    top.set_title(f"GPU {gpu['index']} {gpu.get('name', '')} ({gpu.get('uuid')})")
    top.legend(loc="lower left", fontsize=8)
    hbm.legend(loc="lower right", fontsize=8)
    samples = burn["telemetry"]["samples"]
    ts = [s["t"] / 60 for s in samples]

    def series(field: str) -> list[float]:
        return [float("nan") if (v := s["gpus"][index].get(field)) is None else v for s in samples]

    if samples:
        bottom.plot(ts, series("gfx_mhz"), color="C2", label="clock (MHz)")
        bottom.plot(ts, series("power_w"), color="C3", label="power (W)")
        bottom.plot(ts, series("power_limit_w"), color="C3", ls="--", lw=0.8, label="board limit (W)")
        bottom.plot(ts, series("temp_c"), color="C4", label="temperature (C)")
        bottom.legend(loc="lower left", fontsize=8, ncol=4)
    else:
        bottom.text(0.5, 0.5, "no telemetry", ha="center", transform=bottom.transAxes)
    bottom.set_xlabel("minutes")
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()


def render_html(report: dict) -> str:
    ok = bool(report.get("passed"))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>rocmstack doctor: {_e(report.get('host'))}</title><style>{_CSS}</style></head><body>",
        f"<h1>rocmstack doctor on {_e(report.get('host'))}</h1>",
        f'<p id="verdict" class="{"pass" if ok else "fail"}">{_e(report.get("verdict"))}</p>',
        f"<p>started {_e(report.get('started_at'))}, {_e(report.get('seconds'))} s, "
        f"level {_e((report.get('options') or {}).get('level'))}</p>",
        '<table id="checks"><tr><th>check</th><th>status</th><th>result</th></tr>',
    ]
    for c in report.get("checks", []):
        fix = f"<br><i>fix: {_e(c['fix'])}</i>" if c.get("fix") and c["status"] != "pass" else ""
        parts.append(
            f'<tr><td>{_e(c["id"])}</td><td class="{_e(c["status"])}">{_e(c["status"])}</td>'
            f"<td>{_e(c['summary'])}{fix}</td></tr>"
        )
    parts.append("</table>")
    trend = trend_rows(report)
    if trend:
        parts.append('<h2>Trend against the previous run</h2><table id="trend">')
        parts.append("<tr><th>figure</th><th>previous</th><th>now</th><th>change</th></tr>")
        for row in trend:
            cls = ' class="warn"' if row["worse"] else ""
            parts.append(
                f"<tr><td>{_e(row['key'])}</td><td>{row['previous']:.4g}</td><td>{row['current']:.4g}</td>"
                f"<td{cls}>{row['change']:+.1%}</td></tr>"
            )
        parts.append("</table>")
    burn = (report.get("active") or {}).get("burn_in")
    if isinstance(burn, dict):
        tele = burn["telemetry"]
        parts.append(
            f"<h2>Burn-in</h2><p>{_e(burn['minutes'])} min on {len(burn['gpus'])} "
            f"{'GPU' if burn['mode'] == 'gpu' else 'CPU stand-in'}(s), telemetry: "
            f"{_e(tele.get('source') or tele.get('why_none'))}, {len(tele['samples'])} samples</p>"
        )
        for i, gpu in enumerate(burn["gpus"]):
            uri = "data:image/png;base64," + base64.b64encode(gpu_plot(burn, i)).decode("ascii")
            alt = f"GPU {gpu['index']} burn-in"
            parts.append(
                f'<figure class="gpu"><img src="{uri}" alt="{_e(alt)}"><figcaption>{_e(alt)}: rate per window, '
                "clock, power and temperature</figcaption></figure>"
            )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_html(path: Path, report: dict) -> None:
    text = render_html(report)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--html {path}: {exc.strerror}", fix="give a writable file path") from None
