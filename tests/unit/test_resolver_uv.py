"""The pip-layer closure resolved by uv: real uv against the real index (``network``), plus the pure parts
(layer assignment, conflict line) on uv's own output format."""

from __future__ import annotations

import pytest

from rocmstack.errors import ExitCode, NetworkError
from rocmstack.resolver import uv
from rocmstack.resolver.uv import Inputs, ProvidedDist, ResolutionError

# uv's message for the verl 0.9.0 / transformers>=5.12 set (uv 0.13.9, `uv pip compile`, the same
# requirements as the verl-0.9.0-rocm10 recipe's verl layer plus verl from PyPI).
VERL_CONFLICT = """error: No solution found when resolving dependencies
  cause: Because verl==0.9.0 depends on one of:
             transformers>=5.5.3,<5.6.0
             transformers>5.6.0,<5.11
         and you require verl==0.9.0, we can conclude that you require one of:
             transformers>=5.5.3,<5.6.0
             transformers>5.6.0,<5.11

         And because you require transformers>=5.12, we can conclude that your requirements are unsatisfiable.
"""

TORCH_DEPS = ("filelock", "typing-extensions>=4.10.0", "sympy>=1.13.3", "networkx>=2.5.1", "jinja2", "fsspec")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCMSTACK_CACHE", str(tmp_path / "cache"))


def _entry(name, via):
    return uv._Entry(name=name, version="1", hashes=("sha256:00",), via=tuple(via))


def test_a_package_belongs_to_the_first_layer_that_reaches_it():
    entries = [
        _entry("ray", ["-r ray.in"]),
        _entry("aiohttp", ["ray"]),
        _entry("yarl", ["aiohttp"]),
        _entry("transformers", ["-r verl.in"]),
        _entry("tokenizers", ["transformers"]),
        _entry("filelock", ["torch", "transformers"]),  # torch is provided: reached from verl's layer
        _entry("pyyaml", ["ray", "transformers"]),
    ]
    layers = {p.name: p.layer for p in uv.assign_layers(entries, ["ray", "megatron", "verl"])}
    assert layers == {
        "ray": "ray",
        "aiohttp": "ray",
        "yarl": "ray",
        "pyyaml": "ray",
        "transformers": "verl",
        "tokenizers": "verl",
        "filelock": "verl",
    }


def test_compiled_output_with_hashes_and_line_annotations_parses():
    text = (
        "tomli==2.0.1 \\\n    --hash=sha256:bb \\\n    --hash=sha256:aa\n    # via -r verl.in\n"
        "iniconfig==2.0.0 \\\n    --hash=sha256:cc\n    # via -r ray.in\n"
        "\n# The following packages were excluded from the output:\n# torch\n"
    )
    got = uv.assign_layers(uv.parse_compiled(text), ["ray", "verl"])
    assert [p.to_json() for p in got] == [
        {"name": "iniconfig", "version": "2.0.0", "hashes": ["sha256:cc"], "layer": "ray"},
        {"name": "tomli", "version": "2.0.1", "hashes": ["sha256:aa", "sha256:bb"], "layer": "verl"},
    ]


def test_conflict_chain_is_one_line_naming_both_sides():
    line, full = uv.conflict_chain(VERL_CONFLICT)
    assert line == (
        "verl==0.9.0 depends on transformers>=5.5.3,<5.6.0 or transformers>5.6.0,<5.11; "
        "you require verl==0.9.0 and transformers>=5.12"
    )
    assert full.startswith("error: No solution found")


@pytest.mark.network
def test_verl_layers_resolve_around_the_base_torch_without_cuda_wheels():
    inputs = Inputs(
        layers=(
            ("ray", ("ray[default,serve]==2.58.0",)),
            ("megatron", ("megatron-core==0.18.0",)),
            ("verl", ("transformers>=5.12", "accelerate>=1.14.0", "torchao>=0.16.0")),
        ),
        provided=(ProvidedDist(name="torch", version="2.12.0+rocm10.0", requires=TORCH_DEPS),),
        python="3.12",
        platform="x86_64-manylinux_2_39",
    )
    packages = uv.resolve(inputs)
    names = {p.name: p for p in packages}
    assert len(packages) > 60 and "torch" not in names
    assert not [n for n in names if n.startswith(("nvidia-", "cuda-"))]
    assert names["ray"].layer == "ray" and names["megatron-core"].layer == "megatron"
    assert names["accelerate"].layer == "verl" and names["aiohttp"].layer == "ray"
    assert all(p.hashes and all(h.startswith("sha256:") for h in p.hashes) for p in packages)
    assert uv.resolve(inputs) == packages  # the cached answer is the same answer


@pytest.mark.network
def test_unsatisfiable_set_fails_naming_both_sides():
    inputs = Inputs(
        layers=(("verl", ("verl==0.9.0", "transformers>=5.12")),),
        provided=(ProvidedDist(name="torch", version="2.12.0", requires=TORCH_DEPS),),
    )
    with pytest.raises(ResolutionError) as exc:
        uv.resolve(inputs)
    assert exc.value.exit_code == ExitCode.FAILED
    assert "verl==0.9.0" in exc.value.message and "transformers>=5.12" in exc.value.message
    assert "No solution found" in (exc.value.detail or "")
    # Accepted on purpose: the recipe's own range overrides verl's.
    accepted = Inputs(layers=inputs.layers, provided=inputs.provided, overrides=("transformers>=5.12",))
    got = {p.name: p.version for p in uv.resolve(accepted)}
    assert got["verl"] == "0.9.0" and int(got["transformers"].split(".")[1]) >= 12


# uv's message for a pin to a version that was never released (uv 0.13.9, `rocmstack check verl-0.9.0-rocm10
# --set components.torchao.version=0.99.0`)
NO_RELEASE = """error: No solution found when resolving dependencies
  cause: Because there is no version of torchao==0.99.0 and you require torchao==0.99.0, we can conclude that your requirements are unsatisfiable.
"""  # noqa: E501


def test_a_pin_to_a_version_never_released_is_bad_input_with_the_nearest_releases():
    assert uv._missing_release(NO_RELEASE) == ("torchao", "0.99.0")
    assert uv._missing_release(VERL_CONFLICT) is None  # a real conflict stays a conflict (exit 1)
    inputs = Inputs(layers=(("app", ("tomli==2.0.99",)),))
    with pytest.raises(uv.MissingRelease) as exc:
        uv.resolve(inputs)
    assert exc.value.exit_code == ExitCode.USAGE
    assert exc.value.message == "tomli==2.0.99 is not a release on the package index"
    assert exc.value.fix == "nearest releases: 2.0.2, 2.1.0; pin one of them"
    assert uv.nearest_releases(inputs, "tomli", "0.0.1") == ["0.2.0"]  # nothing below: the one above


def test_unreachable_index_is_one_line_exit_4(monkeypatch):
    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("UV_NO_CACHE", "1")
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    with pytest.raises(NetworkError) as exc:
        uv.resolve(Inputs(layers=(("ray", ("iniconfig==2.0.0",)),)))
    assert exc.value.exit_code == ExitCode.ENGINE and "\n" not in exc.value.one_line()
    assert "package index unreachable" in exc.value.message


def test_uv_locks_with_no_build_and_no_configuration_but_ours():
    """No sdist is built while locking (its setup code would run here) and no uv.toml/pyproject.toml found
    around the work folder or in the user's config steers the resolution; only the inputs' own uv.toml."""
    argv = uv.compile_argv(Inputs(layers=(("ray", ("iniconfig==2.0.0",)),)), ["ray.in"])
    assert argv[1:4] == ["--no-config", "pip", "compile"] and "--no-build" in argv
    assert argv[argv.index("--config-file") + 1] == "uv.toml"
