"""Image references: the OCI distribution reference grammar, the registry host."""

from __future__ import annotations

import pytest

from rocmstack.container import reference as R
from rocmstack.errors import InputError


@pytest.mark.parametrize(
    "ref",
    [
        "rocm/verl:verl-0.7.1.amd0_rocm7.0.2_ubuntu22.04_py3.12_vllm0.20.2",  # the upstream tag style
        "docker.io/rocm/primus:v26.7",
        "localhost:5000/a/b-c__d.e:tag_1",
        "ghcr.io/org/img@sha256:" + "a" * 64,
        "[::1]:5000/img:1",
        "img",
    ],
)
def test_valid_references(ref):
    assert str(R.parse_reference(ref)) == ref


@pytest.mark.parametrize(
    "ref",
    [
        "Rocm/verl:1",  # uppercase repository
        "rocm/verl:.hidden",  # tag cannot start with '.'
        "rocm/verl:-x",  # nor '-'
        "rocm/verl:" + "x" * 129,
        "rocm//verl:1",
        "rocm/verl:a:b",
        "rocm/verl_:1",  # separator at the end of a component
        "rocm/verl:>=5.12",
        "",
    ],
)
def test_invalid_references(ref):
    with pytest.raises(InputError):
        R.parse_reference(ref)


def test_registry_host_follows_dockers_rule():
    assert R.registry_host("ghcr.io/acme/verl") == "ghcr.io"
    assert R.registry_host("localhost:5000/verl") == "localhost:5000"
    assert R.registry_host("localhost/verl") == "localhost"
    assert R.registry_host("acme/verl") is None
    assert R.registry_host("ghcr.io") is None  # no path after it: a repository name, not a host
