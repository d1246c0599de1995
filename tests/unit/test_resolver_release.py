"""How a base component's stand-in release is held against the versions a recipe declares."""

from __future__ import annotations

from rocmstack.resolver.release import conflicts

# verl 0.7.1's Requires-Dist, as its wheel on PyPI declares them (https://pypi.org/project/verl/0.7.1/).
VERL_071 = (
    "accelerate",
    "numpy<2.0.0",
    "ray[default]>=2.41.0",
    "tensordict!=0.9.0,<=0.10.0,>=0.8.0",
    "transformers",
    'pytest; extra == "test"',
    'sglang[openai,srt]==0.5.8; extra == "sglang"',
)


def test_a_declared_version_outside_a_required_range_is_a_conflict():
    found = conflicts("verl==0.7.1", VERL_071, {"ray": "2.40.0", "numpy": "1.26.4"}, python="3.12")
    assert found == ["verl==0.7.1 depends on ray[default]>=2.41.0; the recipe declares ray 2.40.0"]


def test_extras_markers_undeclared_and_unversioned_requirements_are_not_conflicts():
    declared = {"ray": "2.55.1", "sglang": "0.4.0", "transformers": "4.0.0", "pytest": "1.0"}
    assert conflicts("verl==0.7.1", VERL_071, declared, python="3.12") == []
    old_python = ("tomli>=2; python_version < '3.11'",)
    assert conflicts("x==1", old_python, {"tomli": "1.0"}, python="3.12") == []
    assert conflicts("x==1", old_python, {"tomli": "1.0"}, python="3.10") != []


def test_a_prerelease_as_declared_by_a_base_is_judged_by_its_version():
    requires = ("vllm>=0.20",)
    assert conflicts("x==1", requires, {"vllm": "0.20.2rc1.dev253"}, python="3.12") == []
    assert conflicts("x==1", requires, {"vllm": "0.19.9rc1"}, python="3.12") != []
