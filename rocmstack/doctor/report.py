"""Report formats: a rich table (default), Markdown for CI job summaries, JUnit XML for CI test reporting.
JSON is the report dict itself (rocmstack.output.print_json), built as a ``DoctorReport`` (a node's) or a
``ClusterReport``; ``upgrade`` reads the schema before."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import Field
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from rocmstack.doctor.model import EARLIER, SCHEMA, verdict_renamed
from rocmstack.errors import printable
from rocmstack.output import print_json, print_table, stdout
from rocmstack.wire import Scalar, WireModel

if TYPE_CHECKING:
    from rocmstack.doctor.model import Check

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "error": "bold magenta", "skip": "dim"}
MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "error": "ERROR", "skip": "skip"}
NODE_STYLE = {
    "passed": "green",
    "failed": "bold red",
    "died": "bold red",
    "timeout": "bold red",
    "error": "bold magenta",
}


class CheckRow(WireModel):
    """One check's row (``runner.run_check``); ``schema.json``'s ``check``."""

    id: Scalar
    group: Scalar = None
    title: Scalar = None
    status: Scalar
    summary: Scalar
    details: list[Any] = Field(default_factory=list)
    fix: Scalar = None
    source: Scalar = None
    seconds: Scalar = None
    data: Any = None  # the check's measured figures (Prometheus, --history): its own shape
    problem: Scalar = None  # "node" or "user", on a failing or warning row
    advisories: Any = None  # known causes an advisory's error signature matched


class DoctorReport(WireModel):
    """A node's report: what ``run_doctor`` builds and writes, and what its readers (validate's report
    carries it whole; publish, Prometheus, --history, the Slurm hook) read back. ``schema.json`` publishes
    the same keys (a test holds the two equal). Only what a reader cannot do without is required, so a
    report an older image wrote still reads."""

    schema_: Scalar = Field(default=None, alias="schema")
    rocmstack_version: Scalar = None
    mode: Scalar = None
    host: Scalar = None
    node_hostname: Scalar = None  # the node's own name, in a cluster run
    started_at: Scalar = None
    seconds: Scalar = None
    options: dict[str, Any] | None = None
    platform: dict[str, Any] | None = None
    sources: list[Any] = Field(default_factory=list)
    checks: list[CheckRow] = Field(default_factory=list)
    summary: dict[str, int] | None = None
    passed: bool | None = None  # no check failed and one at least was judged
    judged: int | None = None  # checks that passed, warned, failed or errored: 0 is exit 5
    verdict: Scalar = None
    environment: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None
    not_run: dict[str, Any] | None = None
    facts: dict[str, Any] | None = None
    active: dict[str, Any] | None = None
    budget: dict[str, Any] | None = None
    history: dict[str, Any] | None = None
    slurm: dict[str, Any] | None = None


class ClusterNode(WireModel):
    node_id: Scalar
    label: Scalar
    address: Scalar = None
    state: Scalar  # running, then passed, failed, died, timeout or error
    error: Scalar = None
    report: dict[str, Any] | None = None  # the node's DoctorReport (or, --only cluster checks, its facts)


class ClusterReport(WireModel):
    """A cluster run's report (``cluster.run_cluster``); ``schema.json``'s ``cluster``."""

    schema_: Scalar = Field(default=None, alias="schema")
    mode: Scalar = None
    address: Scalar = None
    seconds: Scalar = None
    check_ids: list[Any] = Field(default_factory=list)
    nodes: list[ClusterNode] = Field(default_factory=list)
    cluster_checks: list[CheckRow] = Field(default_factory=list)
    crossnode: Any = None
    passed: bool | None = None
    verdict: Scalar = None
    options: dict[str, Any] | None = None


def upgrade(report: Any) -> Any:
    """A report of the EARLIER schema in this one: its verdict ``ok`` is ``passed``, and a cluster's node
    state ``ok`` is ``passed``; a node report inside a cluster's (a node may run an earlier rocmstack)
    likewise. Anything else as given: tolerant of any JSON, as it comes from images and files."""
    if not isinstance(report, dict) or report.get("schema") != EARLIER:
        return report
    return _renamed({**report, "schema": SCHEMA})


def _renamed(report: dict[str, Any]) -> dict[str, Any]:
    out = verdict_renamed(report)
    if isinstance(out.get("nodes"), list):
        out["nodes"] = [_node(n) for n in out["nodes"]]
    return out


def _node(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    out = {**node, "state": "passed"} if node.get("state") == "ok" else dict(node)
    inner = out.get("report")
    if isinstance(inner, dict):
        # a node's report carries its schema; the facts a node sends for --only cluster checks carry none
        out["report"] = upgrade(inner) if "schema" in inner else verdict_renamed(inner)
    return out


def _t(text: object) -> str:
    """Text from outside the program (summaries, details, fixes that quote a model folder's file names,
    paths, GPU names, host names, node errors) as one printable line: no terminal escape reaches the
    terminal and no newline forges a row."""
    return printable(text)


def _cell(text: object) -> Text:
    """Outside text as a table cell: a plain string there would be read as rich markup."""
    return Text(printable(text))


def _m(text: object) -> str:
    """Outside text inside a rich markup string: printable, and its brackets not read as markup."""
    return escape(printable(text))


def render_table(report: dict, console: Console) -> None:
    if report.get("mode") == "cluster":
        render_cluster_table(report, console)
        return
    plat = report.get("platform", {})
    console.print(
        f"[bold]rocmstack doctor[/bold] on {_m(report['host'])}  vendor={_m(plat.get('vendor'))}  "
        f"python={_m(plat.get('python'))}  GPUs: {_m(plat.get('physical_gpus'))} on the node, "
        f"{_m(plat.get('visible_gpus')) if plat.get('visible_gpus') is not None else 'all'} visible  "
        f"({report['seconds']:.2f} s{', --fast' if report['options']['fast'] else ''})"
    )
    sources = Table(title="GPU sources", title_justify="left", show_edge=False, pad_edge=False)
    for col in ("source", "scope", "count", "how"):
        sources.add_column(col, no_wrap=col != "how", overflow="fold")
    for s in report.get("sources", []):
        sources.add_row(
            _cell(s["name"]),
            _cell(s["scope"]),
            "-" if s["count"] is None else _cell(s["count"]),
            Text(_t(s["detail"])),
        )
    print_table(sources, console)
    table = Table(title="Checks", title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("check", no_wrap=True)  # ids are typed back (--skip ID): never cut
    table.add_column("status", no_wrap=True)
    table.add_column("result", overflow="fold")
    group = None
    for c in report["checks"]:
        if c["group"] != group:
            group = c["group"]
            table.add_row(Text(_t(group), style="bold cyan"), "", "")
        table.add_row(
            _cell("  " + _t(c["id"])),
            Text(MARK[c["status"]], style=STYLE[c["status"]]),
            Text(_t(c["summary"])),
        )
        if c["status"] in ("fail", "error", "warn") and c.get("fix"):
            table.add_row("", "", Text(f"fix: {_t(c['fix'])}", style="italic"))
    print_table(table, console)
    trend = trend_rows(report)
    if trend:
        since = next(c for c in report["checks"] if c["id"] == "history-trend")["data"]
        t = Table(
            title=f"Trend against the previous run ({_m(since.get('previous_started_at'))})",
            title_justify="left",
            show_edge=False,
            pad_edge=False,
        )
        for col in ("figure", "previous", "now", "change"):
            t.add_column(col, overflow="fold", justify="left" if col == "figure" else "right")
        for row in trend:
            style = "bold yellow" if row["worse"] else ""
            t.add_row(
                _cell(row["key"]),
                f"{row['previous']:.4g}",
                f"{row['current']:.4g}",
                Text(f"{row['change']:+.1%}", style=style),
            )
        print_table(t, console)
    # a run that judged nothing is no pass and no failure of the node: its own colour
    style = (
        "bold green" if report.get("passed") else "bold yellow" if report.get("judged") == 0 else "bold red"
    )
    console.print(Text(_t(report["verdict"]), style=style))


def trend_rows(report: dict) -> list[dict]:
    """The history-trend check's figure-by-figure comparison, when --history ran it."""
    for c in report.get("checks", []):
        if c["id"] == "history-trend":
            return list((c.get("data") or {}).get("trend") or [])
    return []


def render_cluster_table(report: dict, console: Console) -> None:
    console.print(
        f"[bold]rocmstack doctor[/bold] cluster {_m(report['address'])}: {len(report['nodes'])} node(s) "
        f"({report['seconds']:.1f} s)"
    )
    ids = report.get("check_ids", [])
    # one row per check, one column per node: a level-1 run has ~30 checks, more than fit across a terminal
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("check")
    for node in report["nodes"]:
        table.add_column(Text(_t(node["label"])), justify="center", overflow="fold")
    table.add_row(
        "state", *(Text(_t(n["state"]), style=NODE_STYLE.get(n["state"], "")) for n in report["nodes"])
    )
    statuses = [
        {c["id"]: c["status"] for c in (n.get("report") or {}).get("checks", [])} for n in report["nodes"]
    ]
    for cid in ids:
        table.add_row(
            Text(_t(cid)),
            *(Text(MARK[st[cid]], style=STYLE[st[cid]]) if cid in st else Text("-") for st in statuses),
        )
    print_table(table, console)
    if report.get("cluster_checks"):
        cluster = Table(title="Across the cluster", title_justify="left", show_edge=False, pad_edge=False)
        for col in ("check", "status", "result"):
            cluster.add_column(col, overflow="fold")
        for c in report["cluster_checks"]:
            result = "\n".join(_t(line) for line in [c["summary"], *c.get("details", [])[:12]])
            if c.get("fix") and c["status"] != "pass":
                result += f"\nfix: {_t(c['fix'])}"
            cluster.add_row(_cell(c["id"]), Text(MARK[c["status"]], style=STYLE[c["status"]]), Text(result))
        console.print(cluster)
    for node in report["nodes"]:
        if node["state"] != "passed":
            console.print(
                f"[bold]{_m(node['label'])}[/bold]: {_m(node['state'])}"
                + (f": {_m(node['error'])}" if node.get("error") else "")
            )
            for c in (node.get("report") or {}).get("checks", []):
                if c["status"] in ("fail", "error"):
                    console.print(
                        Text(
                            f"  {_t(c['id'])}: {_t(c['summary'])}"
                            + (f"\n    fix: {_t(c['fix'])}" if c.get("fix") else "")
                        )
                    )
    console.print(Text(_t(report["verdict"]), style="bold green" if report.get("passed") else "bold red"))


MD_SPECIAL = "\\`*_[]<>|~#!"  # what would make outside text a link, an image, HTML, code or a new cell


def _md(text: object) -> str:
    """Outside text in a Markdown table cell: printable (a newline shows as \\n, not a new row) and every
    character that would start Markdown or HTML escaped, so a model folder's name cannot add a link, an
    image or a tag to a CI job summary."""
    return "".join("\\" + ch if ch in MD_SPECIAL else ch for ch in printable(text))


def _code(text: object) -> str:
    """Outside text shown as inline code: printable, and a backtick cannot close the span."""
    return "`" + printable(text).replace("`", "'").replace("|", "\\|") + "`"


def render_markdown(report: dict) -> str:
    icon = {"pass": "✅", "warn": "⚠️", "fail": "❌", "error": "💥", "skip": "⏭️"}
    lines = []
    if report.get("mode") == "cluster":
        ids = report.get("check_ids", [])
        lines += [
            f"## rocmstack doctor: cluster {_md(report['address'])}",
            "",
            f"**{_md(report['verdict'])}**",
            "",
            "| node | state | " + " | ".join(_md(i) for i in ids) + " |",
            "|---|---|" + "---|" * len(ids),
        ]
        for node in report["nodes"]:
            st = {c["id"]: c["status"] for c in (node.get("report") or {}).get("checks", [])}
            lines.append(
                f"| {_md(node['label'])} | {_md(node['state'])} | "
                + " | ".join(icon.get(st.get(c, ""), "-") for c in ids)
                + " |"
            )
        if report.get("cluster_checks"):
            lines += ["", "| across the cluster | status | result | fix |", "|---|---|---|---|"]
            for c in report["cluster_checks"]:
                lines.append(
                    f"| {_code(c['id'])} | {icon[c['status']]} {c['status']} | {_md(c['summary'])} | "
                    f"{_md(c.get('fix') or '') if c['status'] != 'pass' else ''} |"
                )
        return "\n".join(lines) + "\n"
    plat = report.get("platform", {})
    lines += [
        f"## rocmstack doctor: {_md(report['host'])}",
        "",
        f"**{_md(report['verdict'])}** — vendor {_md(plat.get('vendor'))}, "
        f"{_md(plat.get('physical_gpus'))} GPU(s), python {_md(plat.get('python'))}, {report['seconds']:.2f} s",
        "",
        "| check | status | result | fix |",
        "|---|---|---|---|",
    ]
    for c in report["checks"]:
        lines.append(
            f"| {_code(c['id'])} | {icon[c['status']]} {c['status']} | {_md(c['summary'])} | "
            f"{_md(c.get('fix') or '') if c['status'] != 'pass' else ''} |"
        )
    trend = trend_rows(report)
    if trend:
        lines += ["", "| figure (against the previous run) | previous | now | change |", "|---|---|---|---|"]
        for row in trend:
            mark = " ⚠️" if row["worse"] else ""
            lines.append(
                f"| {_code(row['key'])} | {row['previous']:.4g} | {row['current']:.4g} | "
                f"{row['change']:+.1%}{mark} |"
            )
    lines += ["", "| GPU source | scope | count | how |", "|---|---|---|---|"]
    for s in report.get("sources", []):
        lines.append(
            f"| {_md(s['name'])} | {_md(s['scope'])} | {'-' if s['count'] is None else _md(s['count'])} | "
            f"{_md(s['detail'])} |"
        )
    return "\n".join(lines) + "\n"


def _suite(name: str, report: dict) -> ET.Element:
    checks = report.get("checks", [])
    # every case skipped reads as green to a CI: a run that judged nothing is one failing case of its own
    nothing = report.get("judged") == 0
    suite = ET.Element(
        "testsuite",
        name=name,
        tests=str(len(checks) + nothing),
        failures=str(sum(c["status"] == "fail" for c in checks) + nothing),
        errors=str(sum(c["status"] == "error" for c in checks)),
        skipped=str(sum(c["status"] == "skip" for c in checks)),
        time=f"{report.get('seconds', 0):.3f}",
    )
    for c in checks:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=_t(f"{name}.{c['group']}"),
            name=_t(c["id"]),
            time=f"{c.get('seconds', 0):.4f}",
        )
        # printable(): XML 1.0 has no escape for most control characters, so one raw ESC in a summary
        # would make the whole file unreadable to the CI's JUnit parser
        body = "\n".join(
            _t(line)
            for line in [
                c["summary"],
                *c.get("details", []),
                *([f"fix: {c['fix']}"] if c.get("fix") else []),
                f"source: {c['source']}",
            ]
        )
        summary = _t(c["summary"])
        if c["status"] == "fail":
            ET.SubElement(case, "failure", message=summary, type="fail").text = body
        elif c["status"] == "error":
            ET.SubElement(case, "error", message=summary, type="error").text = body
        elif c["status"] == "skip":
            ET.SubElement(case, "skipped", message=summary)
        else:
            ET.SubElement(case, "system-out").text = body
    if nothing:
        case = ET.SubElement(suite, "testcase", classname=_t(f"{name}.run"), name="nothing-judged")
        ET.SubElement(case, "failure", message=_t(report.get("verdict", "")), type="nothing-judged")
    return suite


def render_junit(report: dict) -> str:
    root = ET.Element("testsuites", name="rocmstack doctor")
    if report.get("mode") == "cluster":
        for node in report["nodes"]:
            if node.get("report"):
                root.append(_suite(_t(f"doctor.{node['label']}"), node["report"]))
            else:
                suite = ET.SubElement(
                    root,
                    "testsuite",
                    name=_t(f"doctor.{node['label']}"),
                    tests="1",
                    failures="0",
                    errors="1",
                    skipped="0",
                )
                case = ET.SubElement(suite, "testcase", classname="doctor.cluster", name="node")
                ET.SubElement(
                    case, "error", message=_t(f"node {node['state']}"), type=_t(node["state"])
                ).text = _t(node.get("error") or "")
        if report.get("cluster_checks"):
            root.append(_suite("doctor.cluster", {"checks": report["cluster_checks"]}))
    else:
        root.append(_suite(_t(f"doctor.{report['host']}"), report))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def list_checks_table(checks: Iterable[Check], console: Console) -> None:
    table = Table(show_edge=False, pad_edge=False)
    for col in ("id", "level", "group", "checks that", "needs", "source"):
        table.add_column(col, overflow="fold", no_wrap=col in ("id", "level", "source"))
    for c in checks:
        table.add_row(c.id, str(c.level), c.group, c.title, ", ".join(sorted(c.needs)) or "-", c.source)
    print_table(table, console)


def print_check_list(checks: Iterable[Check], as_json: bool) -> None:
    """``doctor --list-checks``: the checks on stdout, as a table or (``as_json``) a JSON list."""
    if not as_json:
        list_checks_table(checks, stdout())
        return
    print_json(
        [
            {
                "id": c.id,
                "group": c.group,
                "title": c.title,
                "needs": sorted(c.needs),
                "level": c.level,
                "source": c.source,
            }
            for c in checks
        ]
    )
