"""The publish gate: what must hold before a tag is pushed (the push itself runs in the podman e2e test)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rocmstack.errors import CheckFailed, InputError
from rocmstack.publish.gate import SKIP_ALLOWED, check_report, check_reports, load_reports, tag_set
from rocmstack.validate.schema import parse_report

H = "3f" * 32
LABELS = {
    "dev.rocmstack.render-hash": H,
    "dev.rocmstack.recipe": "verl-0.9.0-rocm10",
    "dev.rocmstack.gpu-archs": "gfx950",
}
TWO_ARCH = {**LABELS, "dev.rocmstack.gpu-archs": "gfx942;gfx950"}
CHECKS = (
    "gpu-count",
    "ray-gpus",
    "device-access",
    "torch-arch",
    "lock-drift",
    "patches-applied",
    "vllm-python",
)


def _report(arch="gfx950", **over):
    """The shape `rocmstack validate IMAGE --expect-gpus 8` writes after a full GPU run."""
    rep = {
        "passed": True,
        "verdict": "PASS: doctor, smoke, bench",
        "render_hash": H,
        "mode": "container",
        "gpu_arch": arch,
        "gpu_archs": [arch],
        "image": {"id": "sha256:" + "aa" * 32},
        "options": {"expect_gpus": 8, "doctor_skip": []},
        "stages": [
            {"name": "doctor", "status": "pass"},
            {"name": "smoke", "status": "pass"},
            {"name": "bench", "status": "pass"},
        ],
        "doctor": {
            "report": {
                "platform": {"physical_gpus": 8, "visible_gpus": None, "gpu_archs": [arch]},
                "checks": [{"id": c, "status": "skip" if c == "vllm-python" else "pass"} for c in CHECKS],
            }
        },
        "smoke": {"summary": {"device": "cuda"}},
        "bench": {"report": {"device": {"type": "cuda"}}},
    }
    rep.update(over)
    # What the host writes over the image's claims (the gate reads only this).
    rep.setdefault(
        "host_checked",
        {"gpu_arch": rep["gpu_arch"], "gpu_archs": rep["gpu_archs"], "options": rep["options"]},
    )
    return rep


def _with(path: str, value, arch="gfx950"):
    rep = _report(arch)
    *parents, last = path.split(".")
    node = rep
    for key in parents:
        node = node[key]
    node[last] = value
    return rep


def test_passing_report_of_this_image_opens_the_gate():
    assert check_report(_report(), LABELS, "aa" * 32, "img") == H


def _stage(name, status):
    rep = _report()
    rep["stages"] = [s if s["name"] != name else {**s, "status": status} for s in rep["stages"]]
    return rep


def _skipped_check(check_id):
    rep = copy.deepcopy(_report())
    for c in rep["doctor"]["report"]["checks"]:
        if c["id"] == check_id:
            c["status"] = "skip"
    return rep


@pytest.mark.parametrize(
    ("report", "labels", "message"),
    [
        (_report(passed=False, verdict="FAIL: smoke fail"), LABELS, r"did not pass \(FAIL: smoke fail\)"),
        (_report(), {}, "no dev.rocmstack.render-hash label"),
        (
            _report(render_hash="ee" * 32),
            LABELS,
            "report is for render hash eeeeeeeeeeee, the image is 3f3f3f3f3f3f",
        ),
        (_report(render_hash=None), LABELS, "render hash none"),
        (_report(image={"id": "sha256:" + "bb" * 32}), LABELS, "made from image bbbbbbbbbbbb"),
        (_report(mode="in-place"), LABELS, "validate --in-place"),
        # issue 16.9: a weak report must not open the gate
        (_report(image={"id": None}), LABELS, "records no image id"),
        (_report(image={}), LABELS, "records no image id"),
        (_stage("smoke", "skip"), LABELS, r"smoke stage did not pass \(skip\)"),
        (_stage("bench", "skip"), LABELS, r"bench stage did not pass \(skip\)"),
        (_with("smoke.summary.device", "cpu"), LABELS, "smoke stage ran on cpu, not a GPU"),
        (_with("bench.report.device", {"type": "cpu"}), LABELS, "bench stage ran on cpu, not a GPU"),
        (_with("host_checked.options.expect_gpus", None), LABELS, "without --expect-gpus"),
        (_with("host_checked.options.expect_gpus", 0), LABELS, "without --expect-gpus"),
        (
            _with("doctor.report.platform.physical_gpus", 4),
            LABELS,
            "doctor saw 4 GPU.s., the report expected 8",
        ),
        (_skipped_check("gpu-count"), LABELS, r"doctor check\(s\) gpu-count skipped"),
        (
            _with("host_checked.options.doctor_skip", ["lock-drift"]),
            LABELS,
            r"doctor check\(s\) lock-drift skipped",
        ),
        (_with("doctor.report.checks", []), LABELS, "holds no doctor checks"),
    ],
)
def test_gate_stays_shut(report, labels, message):
    with pytest.raises(CheckFailed, match=message):
        check_report(report, labels, "sha256:" + "aa" * 32, "img")


def test_the_doctor_only_cpu_report_of_issue_16_is_refused():
    """`validate --skip-smoke --skip-bench --expect-gpus 0` passed (`PASS: doctor (smoke, bench skipped)`)."""
    rep = _report(verdict="PASS: doctor (smoke, bench skipped)")
    rep["stages"] = [{"name": "doctor", "status": "pass"}, {"name": "smoke", "status": "skip"}]
    with pytest.raises(CheckFailed, match="smoke stage did not pass"):
        check_report(rep, LABELS, "aa" * 32, "img")


def test_allow_skip_is_the_publishers_explicit_extension():
    rep = _skipped_check("lock-drift")
    with pytest.raises(CheckFailed, match="lock-drift skipped"):
        check_report(rep, LABELS, "aa" * 32, "img")
    assert check_report(rep, LABELS, "aa" * 32, "img", frozenset({"lock-drift"})) == H
    assert "lock-drift" not in SKIP_ALLOWED and "gpu-count" not in SKIP_ALLOWED


def test_two_arch_image_needs_a_passing_report_from_each_arch():
    both = [_report("gfx942"), _report("gfx950")]
    render_hash, by_arch = check_reports(both, TWO_ARCH, "aa" * 32, "img")
    assert render_hash == H and sorted(by_arch) == ["gfx942", "gfx950"]
    with pytest.raises(CheckFailed, match="claims gfx942;gfx950 but no report ran on gfx950"):
        check_reports([_report("gfx942")], TWO_ARCH, "aa" * 32, "img")
    failed = _report("gfx950", passed=False, verdict="FAIL: smoke fail")
    with pytest.raises(CheckFailed, match=r"^gfx950: refusing to publish img: .*FAIL: smoke fail"):
        check_reports([_report("gfx942"), failed], TWO_ARCH, "aa" * 32, "img")


@pytest.mark.parametrize(
    ("reports", "message"),
    [
        ([], "no validation report given"),
        ([_report("gfx942"), _report("gfx942")], "two reports for gfx942"),
        ([_report("gfx942"), _report("gfx90a")], "a report ran on 'gfx90a', the image claims gfx942;gfx950"),
        ([_report(None), _report("gfx950")], "records no GPU arch"),
        # a report from another build of the same render, for one of the two legs
        ([_report("gfx942", image={"id": "bb" * 32}), _report("gfx950")], "gfx942: .*made from image bbbb"),
    ],
)
def test_per_arch_gate_refuses(reports, message):
    with pytest.raises(CheckFailed, match=message):
        check_reports(reports, TWO_ARCH, "aa" * 32, "img")


def test_image_without_arch_label_is_refused():
    with pytest.raises(CheckFailed, match=r"no dev.rocmstack.gpu-archs label"):
        check_reports([_report()], {"dev.rocmstack.render-hash": H}, "aa" * 32, "img")


# A real run's stages and results (docs/evidence, rocmstack.validate/1: read as every reader reads it), under
# the identity fields of _report.
_RUN_FILE = Path(__file__).parents[2] / "docs/evidence/validate-h200-final/report.json"
EVIDENCE = parse_report(json.loads(_RUN_FILE.read_text(encoding="utf-8")), _RUN_FILE.name)
RUN = {k: EVIDENCE[k] for k in ("stages", "doctor", "smoke", "bench")}


def test_load_reports_takes_leg_folders(tmp_path):
    from rocmstack.validate.pipeline import SCHEMA

    for arch in ("gfx942", "gfx950"):
        leg = tmp_path / "legs" / f"validation-x-{arch}"
        leg.mkdir(parents=True)
        (leg / "report.json").write_text(json.dumps({**EVIDENCE, **_report(arch), **RUN, "schema": SCHEMA}))
    loaded = load_reports([tmp_path / "legs"])
    assert [r["gpu_arch"] for r in loaded] == ["gfx942", "gfx950"]
    assert load_reports([tmp_path / "legs" / "validation-x-gfx942"])[0]["gpu_arch"] == "gfx942"
    with pytest.raises(InputError, match=r"no report.json in it or in a folder under it"):
        load_reports([tmp_path])


def test_recipe_aliases_float_every_other_tag_is_guarded():
    repo_tags = [
        "ghcr.io/o/verl:verl-0.9.0.amd0_x_gfx950",
        f"ghcr.io/o/verl:r-{H[:12]}",
        "ghcr.io/o/verl:verl-0.9",
        "ghcr.io/o/verl:hotfix",
        "ghcr.io/other/img:r-0",
    ]
    tags, extra = tag_set("ghcr.io/o/verl:verl-0.9.0.amd0_x_gfx950", repo_tags, LABELS, H)
    assert tags.repository == "ghcr.io/o/verl" and tags.content == f"r-{H[:12]}"
    assert {tags.descriptive, *extra} == {"verl-0.9.0.amd0_x_gfx950", "hotfix"}
    assert "verl-0.9" in tags.aliases and "verl-0.9" not in extra
    assert all(r.startswith("ghcr.io/o/verl:") for r in tags.refs())


def test_unknown_recipe_guards_every_tag():
    repo_tags = ["localhost/t:one", "localhost/t:verl-0.9", f"localhost/t:r-{H[:12]}"]
    tags, extra = tag_set("localhost/t:one", repo_tags, {"dev.rocmstack.recipe": "no-such-recipe"}, H)
    assert {tags.descriptive, *extra} == {"one", "verl-0.9"}


def test_short_names_match_their_docker_io_tags():
    tags, _ = tag_set(
        "rocmstack/verl:x", ["docker.io/rocmstack/verl:x", f"docker.io/rocmstack/verl:r-{H[:12]}"], {}, H
    )
    assert tags.descriptive == "x"


def test_image_without_its_content_tag_is_refused():
    with pytest.raises(CheckFailed, match=f"not tagged localhost/t:r-{H[:12]}"):
        tag_set("localhost/t:one", ["localhost/t:one"], {}, H)


def test_the_gate_reads_the_arch_and_options_the_host_wrote_not_the_images():
    """Issue 20.4: an image run on gfx942 reports gfx950; a host run with --expect-gpus 8 whose image
    echoes expect_gpus 1 (and whose doctor saw 1)."""
    forged = _report("gfx950")  # the image's own claims, at the top
    forged["host_checked"] = {"gpu_arch": "gfx942", "gpu_archs": ["gfx942"], "options": forged["options"]}
    with pytest.raises(CheckFailed, match="a report ran on 'gfx942', the image claims gfx950"):
        check_reports([forged], LABELS, "aa" * 32, "img")
    fewer = _with("doctor.report.platform.physical_gpus", 1)
    fewer["options"] = {"expect_gpus": 1, "doctor_skip": []}  # the image's echo
    fewer["host_checked"] = {"gpu_arch": "gfx950", "gpu_archs": ["gfx950"], "options": {"expect_gpus": 8}}
    with pytest.raises(CheckFailed, match=r"doctor saw 1 GPU.s., the report expected 8"):
        check_report(fewer, LABELS, "aa" * 32, "img")
    skips = _report()
    skips["host_checked"]["options"] = {"expect_gpus": 8, "doctor_skip": ["gpu-count"]}
    with pytest.raises(CheckFailed, match=r"gpu-count skipped"):
        check_report(skips, LABELS, "aa" * 32, "img")


@pytest.mark.parametrize("facts", [None, "gfx950", {"gpu_arch": "gfx950"}])
def test_a_report_without_the_hosts_facts_is_refused(facts):
    rep = _report(host_checked=facts)
    with pytest.raises(CheckFailed, match="the report has no host_checked"):
        check_reports([rep], LABELS, "aa" * 32, "img")


def _remote(config, digest="sha256:" + "cd" * 32):
    return {"digest": digest, "config": config}


def test_promotion_compares_the_registry_image_with_the_reports():
    from rocmstack.publish.gate import promoted_image_id

    rep = _report(image={"id": "sha256:" + "aa" * 32, "repo_digests": [], "digest": None})
    assert promoted_image_id(_remote("sha256:" + "aa" * 32), [rep], "r") == "sha256:" + "aa" * 32
    # a swapped tag: its config digest is another build's id, and the gate says so
    swapped = promoted_image_id(_remote("sha256:" + "bb" * 32), [rep], "r")
    with pytest.raises(CheckFailed, match="made from image aaaaaaaaaaaa, this is bbbbbbbbbbbb"):
        check_reports([rep], LABELS, swapped, "r")


def test_an_index_without_config_digest_is_never_taken_for_the_same_build():
    from rocmstack.publish.gate import promoted_image_id

    index = "sha256:" + "cd" * 32
    rep = _report(image={"id": "sha256:" + "aa" * 32, "repo_digests": ["r/x@sha256:" + "ef" * 32]})
    with pytest.raises(
        CheckFailed, match=r"multi-platform index .* not made from an image pulled by that digest"
    ):
        promoted_image_id(_remote(None, index), [rep], "r")
    pulled = _report(image={"id": "sha256:" + "aa" * 32, "repo_digests": [f"r/x@{index}"]})
    assert promoted_image_id(_remote(None, index), [pulled], "r") == "sha256:" + "aa" * 32


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: r.pop("host"), "host: field required"),
        (lambda r: r["stages"][0].pop("summary"), "stages.0.summary: field required"),
        (lambda r: r["smoke"]["summary"].pop("criteria"), "smoke.summary.criteria: field required"),
        (lambda r: r.update(stages={"doctor": "pass"}), "stages: input should be a valid list"),
        (lambda r: r.update(host_checked={"gpu_arch": 942}), "host_checked.gpu_arch: input should be"),
    ],
)
def test_a_malformed_report_is_one_line_naming_the_field(tmp_path, change, field):
    from rocmstack.validate.pipeline import SCHEMA

    rep = copy.deepcopy({**EVIDENCE, **_report(), **RUN, "schema": SCHEMA})
    change(rep)
    (tmp_path / "report.json").write_text(json.dumps(rep))
    with pytest.raises(InputError, match=f"report.json: not a rocmstack.validate/2 report: {field}"):
        load_reports([tmp_path])


def _registry(monkeypatch, config):
    """A registry whose content tag holds the manifest sha256:cd.. of image CONFIG; records copies."""
    import subprocess

    from rocmstack.container import engine as engines

    copies = []
    digest = "sha256:" + "cd" * 32
    monkeypatch.setattr(
        engines,
        "remote_manifest",
        lambda e, ref, **k: {"digest": digest, "config": config} if "r-" in ref else None,
    )
    monkeypatch.setattr(engines, "remote_labels", lambda e, ref, **k: dict(LABELS) if "@" in ref else None)

    def run(argv, timeout, runner=None):
        copies.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(engines, "_run", run)
    return copies, digest


def _promote(reports):
    import io

    from rich.console import Console

    from rocmstack.build.tags import TagSet
    from rocmstack.container.engine import Engine
    from rocmstack.publish.gate import promote

    tags = TagSet(repository="r.io/a/verl", descriptive="verl-0.9_gfx950", content="r-3f3f3f3f3f3f")
    engine = Engine(name="podman", argv=("podman",), version="4")
    return promote(
        tags=tags, render_hash=H, reports=reports, engine=engine, console=Console(file=io.StringIO())
    )


def test_promote_runs_the_gate_and_copies_the_digest_it_checked(monkeypatch):
    """Issue 20.5: promote needed no report and copied whatever the content tag held."""
    copies, digest = _registry(monkeypatch, "sha256:" + "aa" * 32)
    assert _promote([_report()]) == [{"ref": "r.io/a/verl:verl-0.9_gfx950", "pushed": True}]
    assert copies[0][-2:] == [f"docker://r.io/a/verl@{digest}", "docker://r.io/a/verl:verl-0.9_gfx950"]


@pytest.mark.parametrize(
    ("config", "reports", "message"),
    [
        ("sha256:" + "bb" * 32, [_report()], r"made from image aaaaaaaaaaaa, this is bbbbbbbbbbbb"),
        (None, [_report()], r"multi-platform index"),
        ("sha256:" + "aa" * 32, [_report(passed=False, verdict="FAIL: bench fail")], "did not pass"),
        ("sha256:" + "aa" * 32, [], "no validation report given"),
    ],
)
def test_promote_refuses_a_swapped_tag_or_a_shut_gate(monkeypatch, config, reports, message):
    copies, _ = _registry(monkeypatch, config)
    with pytest.raises(CheckFailed, match=message):
        _promote(reports)
    assert copies == []  # nothing was copied
