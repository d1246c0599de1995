"""The pipeline up to a build context (rocmstack.prepare). The gate: lock files written next to the recipe
per arch set; drift between recipe and lock is an error (exit 2) naming the fields, unless --relock; the
committed locks of the shipped recipes are current; one render drafts its context once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rocmstack import prepare
from rocmstack.errors import RuleFailure
from rocmstack.lock.file import arch_key, default_arch_sets, lock_path, read_lock, write_lock
from rocmstack.prepare import LockDrift, gate, lock_resolved, verify
from rocmstack.recipe.load import find_recipe, load_recipe, recipe_files
from rocmstack.recipe.resolve import recipe_arg, resolve

NAME = "verl-0.9.0-rocm10"


@pytest.fixture
def recipe_copy(tmp_path: Path) -> Path:
    dest = tmp_path / f"{NAME}.yaml"
    shutil.copy(find_recipe(NAME), dest)
    return dest


def _resolved(path: Path, arch: str | None = None, overrides: tuple[str, ...] = ()):
    recipe, source = load_recipe(str(path), overrides)
    return resolve(recipe, source, arch, overrides)


def _lock(path: Path, arch: str | None = None) -> dict:
    resolved = _resolved(path, arch)
    entry = lock_resolved(resolved)
    write_lock(lock_path(path), resolved.recipe.name, {resolved.arch_list: entry})
    return entry


def test_lock_entry_holds_pins_digest_rules_and_render_hash(recipe_copy):
    entry = _lock(recipe_copy)
    data = read_lock(recipe_copy.with_name(f"{NAME}.lock.json"))
    assert list(data["entries"]) == ["gfx942;gfx950"] and data["recipe"] == NAME
    assert entry["components"]["vllm"]["ref"] == "v0.27.0" and entry["pins"]["vllm"] == "v0.27.0"
    assert entry["base_digest"] is None and entry["base"]["image"] == "rocm/primus:v26.7"
    assert len(entry["render_hash"]) == 64 and "revision" not in entry["rocmstack"]
    statuses = {r["id"]: r["status"] for r in entry["rules"]}
    assert statuses["verl-vllm-floor"] == "pass" and statuses["verl-transformers-range"] == "warn"


def test_no_drift_then_drift_names_the_fields(recipe_copy):
    _lock(recipe_copy)
    assert verify(_resolved(recipe_copy)).status == "locked"
    text = (
        recipe_copy.read_text()
        .replace("\n    ref: v0.27.0\n", "\n    ref: v0.28.0\n")
        .replace('SGLANG_USE_AITER: "0"', 'SGLANG_USE_AITER: "1"')
    )
    recipe_copy.write_text(text)
    with pytest.raises(LockDrift) as err:
        verify(_resolved(recipe_copy))
    assert err.value.message.endswith(
        "recipe drifted from verl-0.9.0-rocm10.lock.json [gfx942;gfx950]: "
        "components.vllm.ref, env.SGLANG_USE_AITER"
    )
    assert int(err.value.exit_code) == 2 and "--relock" in err.value.fix


def test_relock_accepts_the_change(recipe_copy):
    _lock(recipe_copy)
    recipe_copy.write_text(recipe_copy.read_text().replace("version: 2.58.0", "version: 2.58.1"))
    with pytest.raises(LockDrift, match=r"components.ray.version"):
        verify(_resolved(recipe_copy))
    assert verify(_resolved(recipe_copy), relock=True).status == "relocked"
    assert verify(_resolved(recipe_copy)).status == "locked"
    assert (
        read_lock(lock_path(recipe_copy))["entries"]["gfx942;gfx950"]["components"]["ray"]["version"]
        == "2.58.1"
    )


def test_revision_is_ignored_and_a_moved_render_hash_is_only_a_note(recipe_copy):
    _lock(recipe_copy)
    path = lock_path(recipe_copy)
    data = json.loads(path.read_text())
    entry = data["entries"]["gfx942;gfx950"]
    entry["rocmstack"]["revision"] = "some-other-commit"
    path.write_text(json.dumps(data))
    assert verify(_resolved(recipe_copy)).notes == ()
    entry["render_hash"] = "0" * 64
    path.write_text(json.dumps(data))
    state = verify(_resolved(recipe_copy))
    assert state.status == "locked" and "render hash moved" in state.notes[0]


def test_an_arch_set_without_entry_is_unlocked_not_an_error(recipe_copy):
    _lock(recipe_copy)
    state = verify(_resolved(recipe_copy, "gfx950"))
    # The copy is not on the search path (its name finds the shipped file): the hint names its path.
    assert (
        state.status == "unlocked" and f"rocmstack lock {recipe_copy} --gpu-arch 'gfx950'" in state.notes[0]
    )


def test_lock_hints_name_a_recipe_the_way_that_finds_it(recipe_copy, monkeypatch):
    assert recipe_arg(_resolved(find_recipe(NAME))) == NAME
    assert recipe_arg(_resolved(recipe_copy)) == str(recipe_copy)
    monkeypatch.setenv("ROCMSTACK_RECIPES_PATH", str(recipe_copy.parent))
    # Found by name only through the search path (it shadows the shipped one): the hint carries the folder,
    # so that it runs as printed without --recipes-dir or the variable.
    assert recipe_arg(_resolved(recipe_copy)) == f"{NAME} --recipes-dir {recipe_copy.parent}"
    odd = recipe_copy.parent / "with space"
    odd.mkdir()
    moved = odd / recipe_copy.name
    recipe_copy.rename(moved)
    assert recipe_arg(_resolved(moved)) == f"'{moved}'"


def test_a_failing_set_is_never_locked(recipe_copy):
    recipe_copy.write_text(recipe_copy.read_text().replace('python: "3.12"', 'python: "3.11"'))
    with pytest.raises(RuleFailure, match="vllm-rocm-python"):
        lock_resolved(_resolved(recipe_copy))
    assert not lock_path(recipe_copy).exists()


def test_gate_compares_the_recipe_without_overrides(recipe_copy):
    _lock(recipe_copy)
    checked = gate(str(recipe_copy), None, ["ray.version=2.58.1"])
    assert checked.lock.status == "locked"
    assert checked.resolved.recipe.components["ray"].version == "2.58.1"
    assert "--set on top of the lock: ray.version=2.58.1" in checked.notes
    with pytest.raises(RuleFailure):
        gate(str(recipe_copy), None, ["base.python=3.11"])
    assert gate(str(recipe_copy), None, ["base.python=3.11"], ignore=["vllm-rocm-python"]).ignored == (
        "vllm-rocm-python",
    )


def test_an_unreadable_lock_stops_the_gate(recipe_copy):
    lock_path(recipe_copy).write_text("{not json")
    with pytest.raises(Exception, match="unreadable lock file"):
        verify(_resolved(recipe_copy))


@pytest.mark.parametrize("name", sorted(recipe_files()))
def test_committed_locks_cover_the_default_arch_sets_without_drift(name):
    recipe, path = load_recipe(name)
    data = read_lock(lock_path(path))
    assert data is not None, f"{name}: no committed lock; run `rocmstack lock --all`"
    assert set(data["entries"]) == {arch_key(s) for s in default_arch_sets(recipe)}
    for archs in default_arch_sets(recipe):
        assert verify(resolve(recipe, path, arch_key(archs))).status == "locked"


@pytest.mark.parametrize("name", sorted(recipe_files()))
def test_committed_locks_are_full_with_hashes_and_commits(name):
    """Every pip-installed package with its hashes and layer; every git component at a full commit, or
    named under `unresolved`; nothing of the base's torch stack or CUDA; no source revision."""
    recipe, path = load_recipe(name)
    for key, entry in read_lock(lock_path(path))["entries"].items():
        assert isinstance(entry["packages"], list) and "revision" not in entry["rocmstack"], key
        pypi = {c.package or n for n, c in recipe.components.items() if c.source == "pypi"}
        names = {p["name"] for p in entry["packages"]}
        assert {n.lower() for n in pypi} <= names, key
        for p in entry["packages"]:
            assert p["hashes"] and all(h.startswith("sha256:") for h in p["hashes"]), p
            assert set(p) == {"name", "version", "hashes", "layer"}
        assert not [n for n in names if n.startswith(("nvidia-", "cuda-")) or n == "torch"], key
        gits = {n for n, c in recipe.components.items() if c.source == "git"}
        assert set(entry["git"]) == gits, key
        for comp, g in entry["git"].items():
            assert set(g) == {"url", "ref", "commit"}
            assert (g["commit"] and len(g["commit"]) == 40) or any(
                u.startswith(f"{comp}: ") for u in entry.get("unresolved", ())
            ), (key, comp)


def _committed_lock_beside(copy: Path, requirements: list[str] | None) -> None:
    """The shipped lock of NAME next to COPY, its rocmstack layer recorded for REQUIREMENTS (None: a lock from
    before that layer was locked)."""
    data = read_lock(lock_path(find_recipe(NAME)))
    for entry in data["entries"].values():
        entry.pop("rocmstack_requirements", None)
        if requirements is not None:
            entry["rocmstack_requirements"] = requirements
    lock_path(copy).write_text(json.dumps(data))


def test_a_lock_without_rocmstacks_own_layer_is_drift(recipe_copy, monkeypatch):
    from rocmstack import resources

    _committed_lock_beside(recipe_copy, resources.self_requirements())
    assert verify(_resolved(recipe_copy)).status == "locked"
    _committed_lock_beside(recipe_copy, None)
    with pytest.raises(LockDrift) as err:
        verify(_resolved(recipe_copy))
    assert err.value.message == (
        f"{NAME}: {NAME}.lock.json [gfx942;gfx950] is out of date: "
        "rocmstack's own layer is not locked (a lock from before it was)"
    )
    assert int(err.value.exit_code) == 2
    assert err.value.fix == f"run `rocmstack lock {recipe_copy} --gpu-arch 'gfx942;gfx950'`, or pass --relock"
    # rocmstack's own requirements moved since the lock: the same, naming what moved.
    _committed_lock_beside(recipe_copy, resources.self_requirements())
    now = resources.self_requirements()
    monkeypatch.setattr(prepare, "self_requirements", lambda: [*now, "tomli>=2"])
    with pytest.raises(LockDrift, match=r"rocmstack's own requirements changed \(\+tomli>=2\)"):
        verify(_resolved(recipe_copy))


def test_the_rules_judge_the_patches_of_the_folder_the_build_renders_from(tmp_path):
    # tiny-pip's patch exists only in the test patch folder: judged against the shipped specs it is unknown.
    root = Path(__file__).resolve().parents[1] / "fixtures"
    recipe = tmp_path / "tiny-pip.yaml"
    shutil.copy(root / "recipes" / "tiny-pip.yaml", recipe)
    with pytest.raises(RuleFailure, match="patches-apply failed: unknown patch tomli-marker"):
        lock_resolved(_resolved(recipe, "gfx942"))
    entry = lock_resolved(_resolved(recipe, "gfx942"), patches_dir=root / "patches")
    assert {"id": "patches-apply", "status": "pass"} in entry["rules"]
    write_lock(lock_path(recipe), "tiny-pip", {"gfx942": entry})
    checked = gate(str(recipe), "gfx942", patches_dir=root / "patches")
    assert next(r for r in checked.results if r.id == "patches-apply").status == "pass"


def test_a_render_drafts_its_context_and_sbom_once_and_reads_each_patch_file_once(monkeypatch):
    """One `render`: the lock's hash check and the render share one draft; the patch folder is read once."""
    from rocmstack import patches
    from rocmstack.render import context

    counts = {"context": 0, "sbom": 0}
    read: list[Path] = []
    real_files, real_sbom, real_patch = context._context_files, context._sbom, patches.load_patch

    def files(*args, **kwargs):
        counts["context"] += 1
        return real_files(*args, **kwargs)

    def sbom(*args, **kwargs):
        counts["sbom"] += 1
        return real_sbom(*args, **kwargs)

    def load_patch(path):
        read.append(path)
        return real_patch(path)

    monkeypatch.setattr(context, "_context_files", files)
    monkeypatch.setattr(context, "_sbom", sbom)
    monkeypatch.setattr(patches, "load_patch", load_patch)
    checked, rendered, revision, _ = prepare.prepare(NAME, None)
    assert checked.lock.status == "locked"
    assert counts == {"context": 1, "sbom": 1}
    assert read and len(read) == len(set(read))
    # the same bytes as a render of its own (two drafts, for the hash check and the render)
    again = context.render(checked.resolved, ignored_rules=checked.ignored, revision=revision)
    assert rendered.files == again.files and rendered.render_hash == again.render_hash
    assert counts == {"context": 2, "sbom": 2}


def test_prepare_one_recipe(benchmark):
    """Speed of what `rocmstack render verl-0.9.0-rocm10` runs (gate, one draft, finish): a benchmark, not a
    timed assertion. Run: .venv/bin/python -m pytest tests/unit/test_prepare.py -k one_recipe --benchmark-only"""
    checked, rendered, _, _ = benchmark.pedantic(
        prepare.prepare, args=(NAME, None), rounds=5, warmup_rounds=1
    )
    assert rendered.render_hash == checked.draft.render_hash
