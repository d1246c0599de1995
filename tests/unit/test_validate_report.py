"""report.json / report.md / report.html from a real report (the H200 in-place run committed as evidence)."""

from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path

import pytest

from rocmstack.bench.report import upgrade
from rocmstack.doctor.report import upgrade as doctor_upgrade
from rocmstack.errors import InputError
from rocmstack.status import status_of
from rocmstack.validate.report import load, png_data_uri, render_html, render_markdown, write_all
from rocmstack.validate.schema import SCHEMA, parse_report, verdict

EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence" / "validate-h200" / "report.json"
# A real run whose framework stage was skipped, written as rocmstack.validate/1 ("skipped").
SKIPPED_V1 = EVIDENCE.parents[1] / "engine-stack-h200-2026-12-01" / "engine-mask" / "report.json"


@pytest.fixture
def h200_report():
    # committed as rocmstack.validate/1: read the way every reader reads it
    return parse_report(json.loads(EVIDENCE.read_text()), EVIDENCE.name)


def test_an_earlier_report_reads_as_this_schema_with_only_the_skip_spelling_moved():
    raw = json.loads(SKIPPED_V1.read_text())
    assert raw["schema"] == "rocmstack.validate/1"
    read = parse_report(raw, SKIPPED_V1.name)
    assert read["schema"] == SCHEMA
    assert [s["status"] for s in read["stages"]] == [
        "skip" if s["status"] == "skipped" else s["status"] for s in raw["stages"]
    ]
    assert "skip" in [s["status"] for s in read["stages"]]
    # the bench report went through the bench's own reader; nothing else moved
    assert read["bench"]["report"] == upgrade(raw["bench"]["report"])
    assert read["bench"]["report"]["schema"] == 3 and raw["bench"]["report"]["schema"] == 1
    # the smoke's criteria carry their status (below); the rest of its summary as recorded
    summary, recorded = read["smoke"]["summary"], raw["smoke"]["summary"]
    assert {k: v for k, v in summary.items() if k != "criteria"} == {
        k: v for k, v in recorded.items() if k != "criteria"
    }
    # the doctor's report went through the doctor's reader: schema 1's verdict "ok" is "passed"
    assert read["doctor"]["report"] == doctor_upgrade(raw["doctor"]["report"])
    assert read["doctor"]["report"]["passed"] is raw["doctor"]["report"]["ok"]
    assert "ok" not in read["doctor"]["report"]
    # each engine smoke's criteria carry their status too, judged as recorded
    for name, engine in read["engine_smoke"].items():
        was = raw["engine_smoke"][name]["criteria"]
        assert [c["status"] for c in engine["criteria"]] == [status_of(c["passed"]).value for c in was]
    moved = ("schema", "stages", "bench", "smoke", "doctor", "engine_smoke")
    assert {k: v for k, v in read.items() if k not in moved} == {
        k: v for k, v in raw.items() if k not in moved
    }
    assert verdict(read["stages"]) == (raw["passed"], raw["verdict"])  # judged as the run judged itself


def _validate_reports() -> list[Path]:
    found = sorted(EVIDENCE.parents[1].glob("**/report.json"))
    # a doctor's report may have the same name
    return [p for p in found if json.loads(p.read_text()).get("schema", "").startswith("rocmstack.validate/")]


@pytest.mark.parametrize("path", _validate_reports(), ids=lambda p: str(p.relative_to(EVIDENCE.parents[1])))
def test_every_committed_validate_report_reads_as_this_schema(path):
    raw = json.loads(path.read_text())
    read = parse_report(raw, path.name)
    assert read["passed"] is raw["passed"] and read["verdict"] == raw["verdict"]
    doctor = (read.get("doctor") or {}).get("report")
    if doctor is not None:
        assert doctor["passed"] is (raw["doctor"]["report"].get("ok", doctor["passed"]))


def test_an_earlier_report_keeps_a_status_that_was_never_ours_and_fails_on_it(h200_report):
    raw = copy.deepcopy(h200_report)
    raw["schema"] = "rocmstack.validate/1"
    raw["stages"][0]["status"] = "ok"  # never a validate status: not upgraded to a pass
    read = parse_report(raw, "report.json")
    assert read["stages"][0]["status"] == "ok" and verdict(read["stages"])[0] is False
    raw["schema"] = SCHEMA
    raw["stages"][0]["status"] = "skipped"  # /1's spelling in a /2 report is not a skip
    assert verdict(parse_report(raw, "report.json")["stages"])[0] is False


@pytest.fixture
def with_plots(tmp_path, h200_report):
    """The report dir as validate leaves it: the bench's roofline plot (drawn from the real bench numbers)
    and a smoke PNG."""
    from rocmstack.bench.plot import plot_reports

    plot_reports([h200_report["bench"]["report"]], tmp_path / "bench" / "roofline.png")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    (tmp_path / "smoke").mkdir()
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [0.1, 0.3, 0.5])
    fig.savefig(tmp_path / "smoke" / "reward.png")
    plt.close(fig)
    return tmp_path


def test_three_files_and_a_lossless_json(with_plots, h200_report):
    paths = write_all(h200_report, with_plots)
    assert [p.name for p in paths] == ["report.json", "report.md", "report.html"]
    assert load(with_plots) == h200_report


def test_html_is_self_contained(with_plots, h200_report):
    write_all(h200_report, with_plots)
    page = (with_plots / "report.html").read_text()
    assert "<style>" in page and "<script" not in page.lower()
    assert not re.search(r'(src|href)="(?!data:)', page), "every resource must be inline"
    assert 'id="verdict">PASS: doctor, smoke, bench<' in page
    uris = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(uris) == 2  # smoke reward curve + roofline (the other smoke plots are absent here)
    assert base64.b64decode(uris[-1]) == (with_plots / "bench" / "roofline.png").read_bytes()
    for check in h200_report["doctor"]["report"]["checks"]:
        assert f"<td>{check['id']}</td>" in page


def test_html_escapes_what_tools_printed(tmp_path, h200_report):
    rep = copy.deepcopy(h200_report)
    rep["doctor"]["report"]["checks"][0]["summary"] = "<script>alert(1)</script> & <b>"
    write_all(rep, tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;" in page


def test_failed_report_renders_as_failure(tmp_path, h200_report):
    rep = copy.deepcopy(h200_report)
    rep.update(passed=False, verdict="FAIL: smoke fail")
    rep["stages"][1].update(status="fail", summary="FAIL: sync_canary | rollout stale")
    write_all(rep, tmp_path)
    assert 'class="verdict fail"' in (tmp_path / "report.html").read_text()
    md = (tmp_path / "report.md").read_text()
    assert md.startswith("## rocmstack validate: FAIL")
    assert "| smoke | FAIL |" in md and "sync_canary \\| rollout stale" in md


def test_markdown_has_stages_doctor_smoke_and_bench(h200_report):
    md = render_markdown(h200_report)
    assert "| doctor | PASS |" in md and "| gpu-count | PASS |" in md
    assert "| sync_canary | PASS |" in md and "| reference | 64 | 33,340.5 |" in md


def test_png_data_uri_refuses_non_png(tmp_path):
    (tmp_path / "x.png").write_bytes(b"GIF89a")
    assert png_data_uri(tmp_path / "x.png") is None and png_data_uri(tmp_path / "missing.png") is None


def test_load_names_what_is_wrong(tmp_path):
    with pytest.raises(InputError, match=r"no report.json in it"):
        load(tmp_path)
    (tmp_path / "report.json").write_text("{")
    with pytest.raises(InputError, match="not readable JSON"):
        load(tmp_path)
    (tmp_path / "report.json").write_text(json.dumps({"schema": "rocmstack.doctor/1"}))
    with pytest.raises(InputError, match=r"schema 'rocmstack.doctor/1', expected rocmstack.validate/2"):
        load(tmp_path)


def test_container_report_names_the_engine_and_its_commands(tmp_path, h200_report, monkeypatch):
    from rocmstack.validate.container import InImageArgs, plan

    monkeypatch.delenv("ROCMSTACK_PODMAN_STORAGE_DRIVER", raising=False)  # podman's own storage settings

    rep = copy.deepcopy(h200_report)
    p = plan(
        engine="buildah",
        host="cpu",
        image="localhost/t:1",
        report_dir=tmp_path,
        args=InImageArgs(expect_gpus=0),
    )
    rep.update(
        mode="container",
        engine={**p.as_dict(), "exit_code": 0},
        image={"ref": "localhost/t:1", "id": "sha256:ab", "labels": {"dev.rocmstack.recipe": "tiny-pip"}},
    )
    write_all(rep, tmp_path)
    assert "- mode: container (buildah)" in (tmp_path / "report.md").read_text()
    page = (tmp_path / "report.html").read_text()
    assert "container via buildah" in page and "rocmstack validate &mdash; localhost/t:1" in page
    assert "buildah from --pull=never" in page and "<td>dev.rocmstack.recipe</td>" in page


def test_secrets_from_the_environment_never_reach_the_report(tmp_path, h200_report, monkeypatch):
    token = "hf_abcdefghijklmnop0123"
    monkeypatch.setenv("HF_TOKEN", token)
    report = copy.deepcopy(h200_report)
    report["stages"][0]["summary"] = f"login failed with {token}"  # a field every form renders
    report["leak"] = f"Traceback: login failed with {token}"
    for path in write_all(report, tmp_path):
        assert token not in path.read_text(encoding="utf-8")
    assert "<redacted>" in (tmp_path / "report.json").read_text()
    assert "&lt;redacted&gt;" in (tmp_path / "report.md").read_text()  # markdown shows it as <redacted>
    assert "&lt;redacted&gt;" in (tmp_path / "report.html").read_text()


HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&|`\n| forged | row |"


def _hostile(node):
    """Every value of the report replaced by markup (numbers too: the renderer must accept only typed
    numbers); the shape stays, so every field is reached."""
    if isinstance(node, dict):
        return {k: _hostile(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_hostile(v) for v in node]
    return node if node is None or isinstance(node, bool) else HOSTILE


def test_hostile_strings_in_every_field_come_out_escaped(tmp_path, h200_report):
    rep = _hostile(h200_report)
    rep["engine"] = _hostile({"engine": "docker", "commands": [["docker", "run"]]})
    write_all(rep, tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert "<script" not in page and "<img src=x" not in page and "onerror=alert(2)>" not in page
    assert page.count("&lt;script&gt;") > 50  # every field was rendered, escaped
    tags = set(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", page))
    assert tags <= {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "h1",
        "h2",
        "div",
        "dl",
        "dt",
        "dd",
        "p",
        "br",
        "code",
        "table",
        "tr",
        "th",
        "td",
        "figure",
        "img",
        "figcaption",
    }, tags
    assert not re.search(r"<img(?![^>]*src=\"data:image/png;base64,)", page)
    md = (tmp_path / "report.md").read_text()
    assert "<script" not in md and "<img" not in md
    rows = [line for line in md.splitlines() if line.startswith("|")]
    assert rows and not any("| forged | row |" in line for line in rows)  # no cell breaks out of its row


def test_terminal_escapes_from_the_image_do_not_reach_report_md_or_html(tmp_path, h200_report):
    """report.md is printed with cat into CI logs and job summaries: an escape sequence from the image
    (a title-setting OSC, a clipboard write, a bidi override) shows as text."""
    rep = copy.deepcopy(h200_report)
    evil = "x\x1b]52;c;cHduZWQ=\x07\x1b[2J\u202e"
    rep["stages"][0]["summary"] = evil
    rep["doctor"]["report"]["checks"][0]["summary"] = evil
    write_all(rep, tmp_path)
    for name in ("report.md", "report.html"):
        text = (tmp_path / name).read_text()
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, name
        assert "\\x1b]52;c;cHduZWQ=\\x07" in text, name


def test_every_report_the_schema_takes_renders(tmp_path):
    """The schema names what the writers index; anything it leaves out is optional to them (issue 20:
    a report that passed the old check crashed the writer on a missing key)."""
    from rocmstack.validate.schema import report_problem

    smallest = {
        "schema": "rocmstack.validate/2",
        "passed": False,
        "verdict": "FAIL",
        "mode": "container",
        "created": None,
        "seconds": None,
        "host": {},
        "stages": [{"name": "doctor", "status": "pass", "seconds": None, "summary": None}],
        "engine": {"engine": "buildah"},
        "doctor": {"report": {"checks": [{"id": "x", "status": "fail", "summary": "s"}]}},
        "smoke": {"summary": {"criteria": [{"name": "n", "status": "skip", "detail": None}], "final": {}}},
        "bench": {
            "report": {
                "shape": {"name": "s"},
                "device": {"name": "d"},
                "settings": {},
                "results": [{"engine": "e", "batch": 1, "status": "pass"}],
                "baseline": {
                    "checks": [
                        {
                            "engine": "e",
                            "batch": 1,
                            "status": "pass",
                            "metric": "decode_tokens_per_s",
                            "decode_tokens_per_s": 1,
                            "baseline_decode_tokens_per_s": 1,
                            "ratio": 1,
                        }
                    ]
                },
            }
        },
    }
    assert report_problem(smallest) is None
    paths = write_all(smallest, tmp_path)
    assert all(p.stat().st_size for p in paths)


def _with_check(report: dict, bench_schema: int, check: dict) -> dict:
    rep = copy.deepcopy(report)
    bench = rep["bench"]["report"]
    bench["schema"] = bench_schema
    first = bench["results"][0]
    bench["baseline"] = {
        "tolerance": 0.1,
        "checks": [{"engine": first["engine"], "batch": first["batch"], **check}],
    }
    return rep


def test_a_baseline_check_of_an_earlier_bench_report_is_shown_as_the_whole_run_rate_it_compared(
    h200_report, tmp_path
):
    """Bench schema 1 and 2 compared the prefill-inclusive tok/s: read today, never shown as a decode rate."""
    old = {"status": "pass", "tokens_per_s": 900.0, "baseline_tokens_per_s": 1000.0, "ratio": 0.9}
    rep = parse_report(_with_check(h200_report, 2, old), "report.json")
    check = rep["bench"]["report"]["baseline"]["checks"][0]
    assert check["metric"] == "tokens_per_s" and check["baseline_tokens_per_s"] == 1000.0
    assert "| 1,000.0 (whole run, old report) | 0.90 |" in render_markdown(rep)
    assert "1,000.0 (whole run, old report)</td>" in render_html(rep, tmp_path)
    new = {"status": "pass", "metric": "decode_tokens_per_s", "decode_tokens_per_s": 900.0}
    new |= {"baseline_decode_tokens_per_s": 1000.0, "ratio": 0.9}
    rep = parse_report(_with_check(h200_report, 3, new), "report.json")
    assert "| 1,000.0 | 0.90 |" in render_markdown(rep) and "whole run" not in render_markdown(rep)


@pytest.mark.parametrize(
    ("check", "problem"),
    [
        ({"status": "pass", "ratio": 1}, "bench.report.baseline.checks.0: unable to extract tag"),
        ({"status": "pass", "ratio": 1, "metric": "ok"}, "does not match any of the expected tags"),
        (
            {"status": "pass", "ratio": 1, "metric": "decode_tokens_per_s", "decode_tokens_per_s": 1},
            "checks.0.decode_tokens_per_s.baseline_decode_tokens_per_s: field required",
        ),
    ],
)
def test_a_baseline_check_that_does_not_name_its_rates_is_refused(h200_report, check, problem):
    from rocmstack.validate.schema import report_problem

    found = report_problem(_with_check(h200_report, 3, check))
    assert found is not None and problem in found


def test_a_criterion_that_could_not_be_measured_is_shown_as_skip_not_fail(h200_report):
    rep = copy.deepcopy(h200_report)
    rep["smoke"]["summary"]["criteria"] = [
        {"name": "sleep_frees_memory", "status": "skip", "detail": "not measurable: cpu"},
        {"name": "all_finite", "status": "pass", "detail": "every logged value is finite"},
    ]
    md = render_markdown(rep)
    assert "| sleep_frees_memory | skip | not measurable: cpu |" in md
    assert "| all_finite | PASS | every logged value is finite |" in md


def test_an_earlier_reports_criteria_carry_their_status():
    raw = json.loads(SKIPPED_V1.read_text())
    old = raw["smoke"]["summary"]["criteria"]
    assert [c["passed"] for c in old] == [False, True, True, True, True, True]
    # /1 wrote null for a criterion that could not be measured (an engine that never slept, on CPU)
    old.append({"name": "sleep_frees_memory", "passed": None, "detail": "not measurable: no sleep"})
    new = parse_report(raw, SKIPPED_V1.name)["smoke"]["summary"]["criteria"]
    want = {None: "skip", True: "pass", False: "fail"}
    assert [c["status"] for c in new] == [want[c["passed"]] for c in old]
    assert all("passed" not in c for c in new)
    assert [{k: v for k, v in c.items() if k != "status"} for c in new] == [
        {k: v for k, v in c.items() if k != "passed"} for c in old
    ]


def test_the_bench_tables_headline_the_decode_rate_the_mbu_is_of(tmp_path, h200_report):
    # The H200 run's batch-64 row: 29,757 tok/s with prefill, 33,340 decode; MBU 0.320 is of the decode rate.
    write_all(h200_report, tmp_path)
    md, page = (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()
    for r in h200_report["bench"]["report"]["results"]:
        decode, whole = f"{r['decode_tokens_per_s']:,.1f}", f"{r['tokens_per_s']:,.1f}"
        row = next(line for line in md.splitlines() if line.startswith(f"| {r['engine']} | {r['batch']} |"))
        assert f"| {decode} | {r['mbu']:.3f} |" in row and whole not in row
        table = page[page.index('<table id="bench">') :]
        assert f"<td class=num>{decode}</td>" in table and f"<td class=num>{whole}</td>" not in table
    assert "| engine | batch | decode tok/s | MBU |" in md and "<th>decode tok/s</th>" in page


def test_the_smoke_throughput_unit_follows_the_device(tmp_path, h200_report):
    assert h200_report["smoke"]["summary"]["device"] != "cpu"
    assert "tokens/GPU/s" in render_html(h200_report, tmp_path)
    h200_report["smoke"]["summary"]["device"] = "cpu"
    page = render_html(h200_report, tmp_path)
    assert "tokens/GPU/s" not in page and " tokens/s, time to verdict" in page
