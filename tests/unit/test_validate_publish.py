"""The publish gate: what must hold before a tag is pushed (the push itself runs in the podman e2e test)."""

from __future__ import annotations

import pytest

from rocmstack.errors import CheckFailed
from rocmstack.validate.publish import check_report, tag_set

H = "3f" * 32
LABELS = {
    "dev.rocmstack.render-hash": H,
    "dev.rocmstack.recipe": "verl-0.9.0-rocm10",
    "dev.rocmstack.gpu-archs": "gfx950",
}


def _report(**over):
    rep = {
        "passed": True,
        "verdict": "PASS: doctor, smoke, bench",
        "render_hash": H,
        "mode": "container",
        "image": {"id": "sha256:" + "aa" * 32},
    }
    rep.update(over)
    return rep


def test_passing_report_of_this_image_opens_the_gate():
    assert check_report(_report(), LABELS, "aa" * 32, "img") == H


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
    ],
)
def test_gate_stays_shut(report, labels, message):
    with pytest.raises(CheckFailed, match=message):
        check_report(report, labels, "sha256:" + "aa" * 32, "img")


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
