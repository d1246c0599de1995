"""The rule condition language: three-valued version matching, each op, combinators, shape checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from rocmstack.rules.conditions import Facts, check_condition, evaluate, version_verdict

FACTS = Facts(
    data={
        "base": {"python": "3.12", "rocm": "10.0", "torch_archs": ["gfx942", "gfx950"]},
        "archs": ["gfx950"],
        "components": {
            "vllm": {"source": "git", "ref": "v0.27.0", "version": "0.27.0"},
            "sglang": {"source": "git", "ref": "0801cc05", "version": None},
            "transformers": {"source": "pypi", "ref": None, "version": ">=5.12"},
            "kernel": {"source": "git", "ref": "0801cc05", "version": None},
        },
        "env": {"PYTORCH_ALLOC_CONF": "expandable_segments:True,garbage_collection_threshold:0.6"},
        "packages": ["cupy-rocm-7-0", "ray"],
        "patches": ["rtld-local"],
    },
    patch_status={"rtld-local": ("ok", "made for >=7.0")},
)


@pytest.mark.parametrize(
    ("pin", "spec", "expected"),
    [
        ("0.27.0", ">=0.18", True),
        ("0.17.1", ">=0.18", False),
        ("0.20.2rc1.dev253", "<=0.20.2", True),  # pre-releases of a pinned build count
        ("2.12.0", "==2.12.*", True),
        ("2.13.0", "==2.12.*", False),
        (">=5.12", ">=5.5.3,<5.11,!=5.6.0", False),  # the whole range lies outside
        (">=5.12", ">=5.13", None),  # some of the range matches
        (">=5.12", ">=5.0", True),
        (">=5.12", "!=5.6.0", True),
        ("==4.15.*", ">=4.15,<4.16", True),
        ("==4.16.*", ">=4.15,<4.16", False),
        ("~=0.16.0", "==0.16.*", True),
        (">=0.16.0,<0.17", ">=0.16.0", True),
        (">=1,<2", "<2", True),
        (">=1", "<2", None),
        ("0.11.0", ">0.11.0", False),
        ("0.11.1", ">0.11.0", True),
        ("10.0", ">=7.0", True),
        ("not-a-version", ">=1", None),
    ],
)
def test_version_verdict(pin, spec, expected):
    assert version_verdict(pin, spec) is expected


@pytest.mark.parametrize(
    ("condition", "verdict"),
    [
        ({"version": {"pin": "components.vllm.version", "spec": ">=0.18"}}, True),
        (
            {"version": {"pin": "components.sglang.version", "spec": ">=0.5"}},
            None,
        ),  # present, no version: unknown
        (
            {"version": {"pin": "components.missing.version", "spec": ">=0.5"}},
            False,
        ),  # absent: nothing to match
        ({"equals": {"pin": "base.python", "value": "3.12"}}, True),
        ({"equals": {"pin": "env.NOPE", "value": "1"}}, False),
        ({"one_of": {"pin": "components.vllm.ref", "values": ["main", "master"]}}, False),
        ({"present": "components.vllm"}, True),
        ({"present": "env.NOPE"}, False),
        ({"contains": {"pin": "env.PYTORCH_ALLOC_CONF", "value": "expandable_segments:True"}}, True),
        ({"contains": {"pin": "patches", "value": "rtld-local"}}, True),
        ({"contains": {"pin": "patches", "value": "sglang-rmsnorm"}}, False),
        ({"subset": {"pin": "archs", "of": "base.torch_archs"}}, True),
        ({"subset": {"pin": "base.torch_archs", "of": "archs"}}, False),
        ({"same": ["components.sglang.ref", "components.kernel.ref"]}, True),
        ({"same": ["components.sglang.ref", "components.vllm.ref"]}, False),
        ({"matches": {"pin": "packages", "pattern": "cupy-cuda*"}}, False),
        ({"matches": {"pin": "packages", "pattern": "cupy-rocm-*"}}, True),
        ({"patches_apply": {}}, True),
        ({"tags_match_versions": {}}, True),
        ({"not": {"present": "env.NOPE"}}, True),
        ({"not": {"version": {"pin": "components.sglang.version", "spec": ">=0.5"}}}, None),
        ({"all": [{"present": "components.vllm"}, {"present": "env.NOPE"}]}, False),
        (
            {
                "all": [
                    {"present": "components.vllm"},
                    {"version": {"pin": "components.sglang.version", "spec": ">=1"}},
                ]
            },
            None,
        ),
        ({"any": [{"present": "env.NOPE"}, {"present": "components.vllm"}]}, True),
        (
            {
                "any": [
                    {"present": "env.NOPE"},
                    {"version": {"pin": "components.sglang.version", "spec": ">=1"}},
                ]
            },
            None,
        ),
        ([{"present": "components.vllm"}, {"present": "components.sglang"}], True),  # a list means all
    ],
)
def test_ops(condition, verdict):
    assert check_condition(condition, "t") == []
    got, text = evaluate(condition, FACTS)
    assert got is verdict
    assert text


def test_texts_name_the_pins_and_values():
    _, text = evaluate({"version": {"pin": "components.vllm.version", "spec": ">=0.30"}}, FACTS)
    assert text == "components.vllm.version 0.27.0 does not match >=0.30"
    _, text = evaluate({"matches": {"pin": "packages", "pattern": "cupy*"}}, FACTS)
    assert text == "packages has [cupy-rocm-7-0] matching cupy*"


def test_patch_and_tag_ops_report_what_is_wrong():
    facts = Facts(
        data={"components": {"vllm": {"source": "git", "ref": "v0.28.0", "version": "0.27.0"}}},
        patch_status={
            "a": ("drop", "sglang 0.5.20 already contains the fix: drop patch a"),
            "b": ("unknown", "no exact version"),
        },
    )
    assert evaluate({"patches_apply": {}}, facts) == (
        False,
        "sglang 0.5.20 already contains the fix: drop patch a",
    )
    assert evaluate({"tags_match_versions": {}}, facts) == (False, "vllm ref v0.28.0 vs version 0.27.0")
    unknown_only = Facts(data={}, patch_status={"b": ("unknown", "no exact version")})
    assert evaluate({"patches_apply": {}}, unknown_only) == (None, "b: no exact version")


@pytest.mark.parametrize(
    ("condition", "problem"),
    [
        ({"verison": {"pin": "a", "spec": ">=1"}}, "unknown op 'verison'"),
        ({"version": {"pin": "a"}}, "expected keys pin, spec"),
        ({"version": {"pin": "a", "spec": "=>1"}}, "not a PEP 440 specifier"),
        ({"present": ["a"]}, "expected a str"),
        ({"same": ["a"]}, "expected two pins"),
        ({"all": [{"present": "a"}, {"bogus": 1}]}, "t.all[1]: unknown op 'bogus'"),
        ({"present": "a", "equals": {"pin": "a", "value": 1}}, "exactly one op"),
        ("present", "exactly one op"),
    ],
)
def test_shape_errors(condition, problem):
    problems = check_condition(condition, "t")
    assert problems and problem in problems[0]


_V = st.tuples(st.integers(0, 3), st.integers(0, 12), st.integers(0, 4)).map(lambda t: ".".join(map(str, t)))
_OPS = st.sampled_from([">=", ">", "<", "<=", "==", "!=", "~="])


def _spec(op: str, v: str) -> str:
    return f"{op}{v}"


_SPEC = st.one_of(
    st.builds(_spec, _OPS, _V),
    st.builds(lambda a, b: f"{a},{b}", st.builds(_spec, _OPS, _V), st.builds(_spec, _OPS, _V)),
    _V.map(lambda v: "==" + v.rsplit(".", 1)[0] + ".*"),
)


@pytest.mark.property
@given(pin=_SPEC, spec=_SPEC, probes=st.lists(_V, min_size=1, max_size=30))
def test_version_verdict_is_sound_for_ranges(pin, spec, probes):
    """True: every version the pin allows satisfies spec; False: none does (checked on sampled versions)."""
    verdict = version_verdict(pin, spec)
    allowed = [p for p in probes if Version(p) in SpecifierSet(pin)]
    hits = [Version(p) in SpecifierSet(spec) for p in allowed]
    if verdict is True:
        assert all(hits)
    elif verdict is False:
        assert not any(hits)
