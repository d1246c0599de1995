"""`rocmstack lock` / `check` end to end on a small recipe: real uv against the real index (``network``),
real git on a local repository that the recipe's https URL is mapped to (git's url.<base>.insteadOf, as a
mirror would be), the real CLI in a subprocess."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocmstack import cli as cli_module
from rocmstack import locking
from rocmstack.resolver import closure as closure_module
from rocmstack.resources import self_requirements
from tests.conftest import ROOT
from tests.unit.test_resolver_git import _git, commit

FIXTURE = ROOT / "tests" / "fixtures" / "recipes" / "tiny-pip.yaml"
UPSTREAM = "https://git.example.org/tiny/helper.git"


def _recipe(folder: Path, name: str = "tiny", extra: str = "") -> Path:
    text = FIXTURE.read_text().replace("name: tiny-pip", f"name: {name}").replace("  - tomli-marker\n", "")
    text = text.replace("patches:\n", "patches: []\n")
    text = text.replace(
        "components:\n",
        "components:\n"
        "  helper:\n"
        "    source: git\n"
        "    layer: app\n"
        f"    url: {UPSTREAM}\n"
        "    ref: main\n"
        "    requirements: requirements.txt\n"
        "    no_deps: true\n",
    )
    path = folder / f"{name}.yaml"
    path.write_text(text + extra)
    return path


@pytest.fixture
def env(tmp_path):
    repo = tmp_path / "upstream"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    commit(repo, {"requirements.txt": "packaging==24.1\n"}, "one")
    return {
        "ROCMSTACK_CACHE": str(tmp_path / "cache"),
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.{repo.as_uri()}.insteadOf",
        "GIT_CONFIG_VALUE_0": UPSTREAM,
        "_repo": str(repo),
    }


def _entry(lock: Path) -> dict:
    return next(iter(json.loads(lock.read_text())["entries"].values()))


@contextlib.contextmanager
def _edited_entry(lock: Path) -> Iterator[dict]:
    """The lock's (only) entry, to change in place; written back on leaving."""
    doc = json.loads(lock.read_text())
    yield next(iter(doc["entries"].values()))
    lock.write_text(json.dumps(doc))


@pytest.mark.network
def test_lock_records_every_package_and_commit_and_moves_only_on_refresh(cli, tmp_path, env):
    recipe = _recipe(tmp_path)
    repo = Path(env["_repo"])
    first = _git(repo, "rev-parse", "HEAD")
    res = cli("lock", str(recipe), "--json", env=env)
    assert res.code == 0, res.err
    lock = tmp_path / "tiny.lock.json"
    entry = _entry(lock)
    assert entry["git"] == {"helper": {"url": UPSTREAM, "ref": "main", "commit": first}}
    packages = {p["name"]: p for p in entry["packages"]}
    assert packages["iniconfig"]["layer"] == "ray" and packages["tomli"]["layer"] == "verl"
    # rocmstack's own requirements (the image carries rocmstack) resolve with the rest, in their own last
    # layer: it installs what no earlier layer does and moves nothing an earlier layer pinned (packaging
    # stays at the app layer's 24.1, though rocmstack alone would take a newer one).
    assert packages["packaging"] == {**packages["packaging"], "version": "24.1", "layer": "app"}
    assert entry["rocmstack_requirements"] == self_requirements()
    assert packages["pydantic"]["layer"] == "rocmstack" and packages["uv"]["layer"] == "rocmstack"
    assert all(p["hashes"] and p["hashes"][0].startswith("sha256:") for p in entry["packages"])
    assert "revision" not in entry["rocmstack"]
    before = lock.read_bytes()

    # Upstream moves: the lock does not follow silently, check still passes against the locked commit.
    second = commit(repo, {"requirements.txt": "packaging==24.2\n"}, "two")
    assert cli("lock", str(recipe), env=env).code == 0 and lock.read_bytes() == before
    ok = cli("check", str(recipe), "--json", env=env)
    resolver = next(r for r in json.loads(ok.out)[0]["results"] if r["id"] == "resolver")
    assert ok.code == 0 and resolver["status"] == "pass", ok.out
    assert cli("lock", str(recipe), "--refresh", "tomli", env=env).code == 0 and lock.read_bytes() == before
    res = cli("lock", str(recipe), "--refresh", env=env)
    assert res.code == 0, res.err
    entry = _entry(lock)
    assert entry["git"]["helper"]["commit"] == second
    assert {p["name"]: p["version"] for p in entry["packages"]}["packaging"] == "24.2"


@pytest.mark.network
def test_check_reports_a_lock_that_no_longer_matches_as_drift(cli, tmp_path, env):
    recipe = _recipe(tmp_path)
    assert cli("lock", str(recipe), env=env).code == 0
    lock = tmp_path / "tiny.lock.json"
    with _edited_entry(lock) as entry:
        entry["packages"] = [p for p in entry["packages"] if p["name"] != "tomli"]
    res = cli("check", str(recipe), env=env)
    assert res.code == 1 and "rule resolver failed: lock out of date: +tomli==2.0.1" in res.err
    assert cli("check", str(recipe), "--offline", env=env).code == 0  # --offline trusts the lock


@pytest.mark.network
def test_a_lock_without_rocmstacks_own_layer_is_drift_never_a_build_time_resolve(cli, tmp_path, env):
    """A lock written before rocmstack's own layer was locked: check and render say to relock; render
    never falls back to installing rocmstack's requirements with pip's resolver."""
    recipe = _recipe(tmp_path)
    assert cli("lock", str(recipe), env=env).code == 0
    lock = tmp_path / "tiny.lock.json"
    with _edited_entry(lock) as entry:
        entry["packages"] = [p for p in entry["packages"] if p["layer"] != "rocmstack"]
        del entry["rocmstack_requirements"]
    res = cli("check", str(recipe), env=env)
    stale = "rule resolver failed: lock out of date: rocmstack's own layer is not locked (a lock from before it was), +"
    assert res.code == 1 and stale in res.err, res.err  # and the packages it would add
    out = tmp_path / "ctx"
    res = cli("render", str(recipe), "-o", str(out), env=env)
    assert res.code == 2 and res.err.count("\n") == 1 and not out.exists(), res.err
    assert "is out of date: rocmstack's own layer is not locked" in res.err
    assert f"run `rocmstack lock {recipe} --gpu-arch 'gfx942'`, or pass --relock" in res.err
    res = cli("render", str(recipe), "-o", str(out), "--relock", env=env)
    assert res.code == 0, res.err
    relocked = _entry(lock)
    assert relocked["rocmstack_requirements"] == self_requirements()
    pins = (out / "rocmstack" / "requirements" / "rocmstack.txt").read_text()
    assert {p["name"] for p in relocked["packages"] if p["layer"] == "rocmstack"} == {
        line.split("==")[0] for line in pins.splitlines() if "==" in line
    }
    dockerfile = (out / "Dockerfile").read_text()
    own = dockerfile.index("--require-hashes -r /opt/rocmstack/requirements/rocmstack.txt")
    assert dockerfile.index("--require-hashes -r /opt/rocmstack/requirements/verl.txt") < own
    assert own < dockerfile.index("guard.py pip-check")
    assert not [r for r in self_requirements() if f'"{r}"' in dockerfile]  # no range reaches the build


@pytest.mark.network
def test_failed_or_unreachable_resolution_leaves_the_lock_untouched(cli, tmp_path, env):
    recipe = _recipe(tmp_path)
    assert cli("lock", str(recipe), env=env).code == 0
    lock = tmp_path / "tiny.lock.json"
    before = lock.read_bytes()
    offline = {**env, "UV_INDEX_URL": "http://127.0.0.1:9/simple", "UV_NO_CACHE": "1", "UV_HTTP_RETRIES": "0"}
    res = cli("lock", str(recipe), "--refresh", env=offline)
    errors = [line for line in res.err.splitlines() if line.startswith("rocmstack:")]
    assert res.code == 4 and len(errors) == 1 and "package index unreachable" in errors[0]
    assert lock.read_bytes() == before
    recipe.write_text(recipe.read_text().replace("version: 2.0.1", "version: 99.0.0"))
    res = cli("lock", str(recipe), env=env)
    # A release that does not exist is bad input (exit 2), named with the nearest one there is
    assert (
        res.code == 2 and "tomli==99.0.0 is not a release on the package index (nearest releases: " in res.err
    )
    assert lock.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tiny.lock.json")]


def test_ctrl_c_during_lock_all_leaves_every_previous_lock(tmp_path, monkeypatch, env):
    """Nothing is written until every recipe resolved: an interrupt in the second keeps the first as it was."""
    folder = tmp_path / "recipes"
    folder.mkdir()
    out = tmp_path / "locks"
    for name in ("a-tiny", "b-tiny"):  # --all with --recipes-dir: these two, in this order
        _recipe(folder, name)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as done:
        cli_module.main(["lock", "--all", "--recipes-dir", str(folder), "--pins-only", "--output", str(out)])
    assert done.value.code == 0
    before = sorted((p.name, p.read_text()) for p in out.iterdir())
    assert [name for name, _ in before] == ["a-tiny.lock.json", "b-tiny.lock.json"]
    calls = []

    def fake_closure(resolved, **kwargs):
        calls.append(resolved.recipe.name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return closure_module.Closure(packages=(), git={}, rocmstack_requirements=tuple(self_requirements()))

    monkeypatch.setattr(locking, "closure", fake_closure)  # the lock run's resolver
    with pytest.raises(SystemExit) as exc:
        cli_module.main(["lock", "--all", "--recipes-dir", str(folder), "--output", str(out)])
    assert exc.value.code == 130 and calls == ["a-tiny", "b-tiny"]
    assert sorted((p.name, p.read_text()) for p in out.iterdir()) == before


def test_lock_of_a_recipe_elsewhere_writes_where_out_dir_says(cli, tmp_path):
    shutil.copy(FIXTURE, tmp_path / "tiny-pip.yaml")
    res = cli(
        "lock",
        str(tmp_path / "tiny-pip.yaml"),
        "--pins-only",
        "--ignore-rule",
        "patches-apply",
        "--patches-dir",
        str(ROOT / "tests" / "fixtures" / "patches"),
        "--output",
        str(tmp_path / "locks"),
    )
    assert res.code == 0, res.err
    assert (tmp_path / "locks" / "tiny-pip.lock.json").is_file() and not (
        tmp_path / "tiny-pip.lock.json"
    ).exists()


def test_lock_hash_only_refreshes_the_render_hash_and_nothing_else(cli, tmp_path):
    shutil.copy(FIXTURE, tmp_path / "tiny-pip.yaml")
    common = ["--patches-dir", str(ROOT / "tests" / "fixtures" / "patches"), "--gpu-arch", "gfx942"]
    recipe = str(tmp_path / "tiny-pip.yaml")
    missing = cli("lock", recipe, "--hash-only", *common)
    assert (
        missing.code == 2
        and "--hash-only: tiny-pip [gfx942] has no entry in tiny-pip.lock.json" in missing.err
    )
    assert cli("lock", recipe, "--pins-only", *common).code == 0
    lock = tmp_path / "tiny-pip.lock.json"
    fresh = json.loads(lock.read_text())
    stale = json.loads(lock.read_text())
    stale["entries"]["gfx942"]["render_hash"] = "0" * 64  # as after a template or rocmstack change
    lock.write_text(json.dumps(stale))
    res = cli("lock", recipe, "--hash-only", *common, "--json")
    assert res.code == 0, res.err
    assert json.loads(lock.read_text()) == fresh  # the hash back, every other field as it was


def test_malformed_provides_is_exit_2_naming_file_and_field(cli, tmp_path):
    bad = (
        _recipe(tmp_path)
        .read_text()
        .replace(
            "  frozen: [wheel]\n",
            "  frozen: [wheel]\n  provides:\n    - name: torch\n      version: '0.0'\n"
            "      requires: ['numpy >>= 1']\n",
        )
    )
    (tmp_path / "tiny.yaml").write_text(bad)
    res = cli("check", str(tmp_path / "tiny.yaml"), "--offline")
    assert res.code == 2 and res.err.count("\n") == 1
    assert "tiny.yaml" in res.err and "base.provides.0.requires.0" in res.err and "numpy >>= 1" in res.err


@pytest.mark.network
def test_an_unreachable_remote_is_left_unlocked_on_request_and_locked_once_it_answers(cli, tmp_path, env):
    recipe = _recipe(tmp_path)
    gone = {**env, "GIT_CONFIG_KEY_0": f"url.{(tmp_path / 'gone').as_uri()}.insteadOf"}
    res = cli("lock", str(recipe), env=gone)
    errors = [line for line in res.err.splitlines() if line.startswith("rocmstack:")]
    assert res.code == 4 and len(errors) == 1 and f"git remote {UPSTREAM} unreachable" in errors[0]
    assert not (tmp_path / "tiny.lock.json").exists()
    res = cli("lock", str(recipe), "--allow-unreachable-git", env=gone)
    assert res.code == 0, res.err
    entry = _entry(tmp_path / "tiny.lock.json")
    assert entry["git"]["helper"]["commit"] is None and entry["requirements_unlocked"] == ["helper"]
    # Only rocmstack's own layer asks for packaging now (helper's requirements file is not locked).
    assert {p["name"]: p["layer"] for p in entry["packages"]}["packaging"] == "rocmstack"
    check = cli("check", str(recipe), "--json", env=gone)  # takes the lock as it is: no remote asked
    row = next(r for r in json.loads(check.out)[0]["results"] if r["id"] == "resolver")
    assert (
        check.code == 0
        and row["status"] == "warn"
        and "not locked (built from the ref): helper" in row["reason"]
    )
    assert cli("lock", str(recipe), env=env).code == 0  # the remote answers again: locked, without --refresh
    entry = _entry(tmp_path / "tiny.lock.json")
    assert entry["git"]["helper"]["commit"] and "requirements_unlocked" not in entry
    assert {p["name"]: p["version"] for p in entry["packages"]}["packaging"] == "24.1"


def test_offline_check_says_which_git_components_the_lock_left_unlocked(cli):
    """The shipped verl-0.9.0 lock records commits it could not reach; --offline must not call that a pass."""
    res = cli("check", "verl-0.9.0-rocm10", "--offline", "--json")
    assert res.code == 0, res.err
    row = next(r for r in json.loads(res.out)[0]["results"] if r["id"] == "resolver")
    assert row["status"] == "warn", row
    assert row["reason"].endswith("not locked (built from the ref): verl, vllm"), row
    assert "where their git remotes are reachable" in row["fix"]


def test_a_relock_hint_names_a_recipe_off_the_search_path_by_its_path(cli, tmp_path):
    recipe = _recipe(tmp_path, "nowhere-else")
    res = cli("check", str(recipe), "--offline", "--json", cwd=tmp_path)
    row = next(r for r in json.loads(res.out)[0]["results"] if r["id"] == "resolver")
    assert row["status"] == "warn" and f"rocmstack lock {recipe} --gpu-arch" in row["fix"], row


@pytest.mark.network
def test_a_child_starts_from_its_parents_lock_and_moves_only_on_refresh(cli, tmp_path, env):
    """A child that only adds an env var keeps every version and commit its parent locked (here a range the
    index now answers higher, and a branch that moved); `lock --refresh` moves them on purpose."""
    repo = Path(env["_repo"])
    commit(repo, {"requirements.txt": "packaging>=24\n"}, "a range")
    first = _git(repo, "rev-parse", "HEAD")
    parent = _recipe(tmp_path, "tiny")
    assert cli("lock", str(parent), env=env).code == 0
    with _edited_entry(tmp_path / "tiny.lock.json") as entry:
        for p in entry["packages"]:
            if p["name"] == "packaging":
                p["version"] = "24.1"  # locked before the newest release came out
    second = commit(repo, {"requirements.txt": "packaging>=24\n", "x": "2"}, "upstream moves")
    child = tmp_path / "tiny-debug.yaml"
    child.write_text(
        "name: tiny-debug\nextends: tiny\ndescription: tiny with debug logging\n"
        "env:\n  TINY_DEBUG: '1'\n"
        "publish:\n  repository: localhost/rocmstack-test/tiny-debug\n  tag: t-{arch}\n  aliases: []\n"
    )
    res = cli("lock", str(child), env=env)
    assert res.code == 0, res.err
    assert "started from tiny.lock.json [gfx942]" in res.err
    entry = _entry(tmp_path / "tiny-debug.lock.json")
    versions = {p["name"]: p["version"] for p in entry["packages"]}
    assert entry["git"]["helper"]["commit"] == first and versions["packaging"] == "24.1"
    parent_versions = {p["name"]: p["version"] for p in _entry(tmp_path / "tiny.lock.json")["packages"]}
    assert versions == parent_versions
    res = cli("lock", str(child), "--refresh", env=env)
    assert res.code == 0, res.err
    entry = _entry(tmp_path / "tiny-debug.lock.json")
    assert entry["git"]["helper"]["commit"] == second
    assert {p["name"]: p["version"] for p in entry["packages"]}["packaging"] != "24.1"


@pytest.mark.network
def test_a_published_release_stands_in_for_git_requirements_and_is_recorded(cli, tmp_path, env):
    """A git component whose requirements cannot be read names a published release: uv reads that release's
    real metadata from the index, its requirements are locked (the release itself never is), and the lock
    says where they came from."""
    recipe = _recipe(tmp_path)
    text = recipe.read_text().replace(
        "    requirements: requirements.txt\n", "    requirements_from: build==1.2.1\n"
    )
    recipe.write_text(text)
    res = cli("lock", str(recipe), env=env)
    assert res.code == 0, res.err
    entry = _entry(tmp_path / "tiny.lock.json")
    assert entry["requirements_from"] == {"helper": "build==1.2.1"}
    packages = {p["name"]: p for p in entry["packages"]}
    # build 1.2.1 declares packaging>=19.1 and pyproject_hooks on PyPI; build itself is not installed.
    assert packages["pyproject-hooks"]["layer"] == "app" and "build" not in packages
    assert packages["packaging"]["layer"] == "app"
    ok = cli("check", str(recipe), "--json", env=env)
    resolver = next(r for r in json.loads(ok.out)[0]["results"] if r["id"] == "resolver")
    assert ok.code == 0 and resolver["status"] == "pass", ok.out


@pytest.mark.network
def test_check_resolves_verl_with_its_published_requirements(cli):
    """verl 0.9.x comes from git; the shipped recipe names the verl 0.9.0 release, whose metadata declares
    ray[default]>=2.41.0: a Ray below that fails check with the conflict."""
    res = cli("check", "verl-0.9.0-rocm10", "--set", "ray.version=2.40.0", "-q")
    assert res.code == 1, res.err
    first = res.err.splitlines()[0]
    assert "rule resolver failed: unsatisfiable: verl==0.9.0 depends on ray[default]>=2.41.0" in first
    lock = json.loads((ROOT / "recipes" / "verl-0.9.0-rocm10.lock.json").read_text())
    for entry in lock["entries"].values():
        assert entry["requirements_from"] == {"verl": "verl==0.9.0"}
        layers = {p["name"]: p["layer"] for p in entry["packages"]}
        assert "verl" not in layers  # installed from git, --no-deps
        # verl's own requirements install with verl's layer (ray[default] and numpy come earlier anyway).
        assert {layers[n] for n in ("tensordict", "codetiming", "hydra-core")} == {"verl"}


@pytest.mark.network
def test_a_base_component_is_checked_against_its_published_requirements(cli):
    """verl 0.7.1 comes with the base image; the recipe names the verl 0.7.1 release, whose wheel's metadata
    (read from the index) requires ray[default]>=2.41.0: a Ray declared below it fails check."""
    res = cli("check", "verl-0.7.1-rocm7.0.2", "--set", "ray.version=2.40.0", "-q")
    assert res.code == 1, res.err
    assert (
        "rule resolver failed: unsatisfiable: verl==0.7.1 depends on ray[default]>=2.41.0; "
        "the recipe declares ray 2.40.0" in res.err.splitlines()[0]
    )
    assert cli("check", "verl-0.7.1-rocm7.0.2", "-q").code == 0
    lock = json.loads((ROOT / "recipes" / "verl-0.7.1-rocm7.0.2.lock.json").read_text())
    assert {json.dumps(e.get("requirements_from")) for e in lock["entries"].values()} == {
        json.dumps({"verl": "verl==0.7.1"})
    }


def test_a_git_components_listed_requirements_are_resolved_with_its_layer(tmp_path):
    """`requires:` is a declared source of a git component's dependencies: the lock resolves (and a locked
    build installs) them in its layer, with no remote asked, so locked and unlocked install the same closure."""
    from rocmstack.recipe.load import load_recipe
    from rocmstack.recipe.resolve import resolve

    path = _recipe(tmp_path)
    text = path.read_text().replace(
        "    requirements: requirements.txt\n",
        "    requires: [packaging>=24, 'tomli; python_version < \"3.11\"']\n",
    )
    path.write_text(text)
    recipe, _ = load_recipe(str(path))
    spec = closure_module.inputs(resolve(recipe, path, None), {})
    app = dict(spec.layers)["app"]
    assert "packaging>=24" in app and 'tomli; python_version < "3.11"' in app
    assert "helper" in spec.no_emit
