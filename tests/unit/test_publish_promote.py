"""rocmstack.publish.promote: the promotion reads the store the --engine choice names (buildah is podman's),
refuses to run without reports, and takes only real doctor check ids as accepted skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmstack.container import engine as engines
from rocmstack.errors import InputError
from rocmstack.publish import gate, promote


def test_buildah_promotes_through_podmans_store(monkeypatch):
    asked = []
    monkeypatch.setattr(promote, "recipe_tags", lambda *a, **k: ("TAGS", "hash"))
    monkeypatch.setattr(gate, "load_reports", lambda paths: ["report"])
    monkeypatch.setattr(gate, "promote", lambda **k: [{"tag": "moved", "engine": k["engine"].name}])

    def detect(choice):
        asked.append(choice)
        return engines.named("podman")

    monkeypatch.setattr(engines, "detect", detect)
    tags, render_hash, moved = promote.promote_recipe(
        recipe="tiny",
        gpu_arch=None,
        overrides=[],
        registry=None,
        aliases=[],
        ignore_rules=[],
        patches_dir=None,
        reports=[Path("out")],
        allow_skip=[],
        insecure=True,
        engine="buildah",
    )
    assert asked == ["podman"] and (tags, render_hash) == ("TAGS", "hash")
    assert moved == [{"tag": "moved", "engine": "podman"}]


def test_no_reports_is_one_line():
    with pytest.raises(InputError, match="--promote needs --reports DIR"):
        promote.promote_recipe(
            recipe="tiny",
            gpu_arch=None,
            overrides=[],
            registry=None,
            aliases=[],
            ignore_rules=[],
            patches_dir=None,
            reports=[],
            allow_skip=[],
            insecure=False,
            engine="auto",
        )


def test_accepted_skips_take_comma_lists_and_refuse_unknown_ids():
    assert promote.accepted_skips(["gpu-count,ray-env", "lock-drift"]) == {
        "gpu-count",
        "ray-env",
        "lock-drift",
    }
    with pytest.raises(InputError, match="no-such-check"):
        promote.accepted_skips(["no-such-check"])
