"""``rules.checking``: ``check`` as a domain call, its one-line failure and its table."""

from __future__ import annotations

import pytest

from rocmstack.errors import InputError, RuleFailure
from rocmstack.rules.checking import CheckRequest, first_failure, print_checks, run_check

NAME = "verl-0.9.0-rocm10"
FAILING = ("vllm.version=0.17.0", "vllm.ref=v0.17.0")


def test_a_shipped_recipe_passes_every_row_and_the_resolver_row_comes_last():
    (run,) = run_check(CheckRequest(recipe=NAME, offline=True))
    assert run.passed and first_failure([run]) is None
    assert run.results[-1].id == "resolver" and run.title == f"{NAME} [gfx942;gfx950]"
    assert run.to_json()["passed"] is True and "ok" not in run.to_json()


def test_the_first_failing_row_is_the_runs_one_line_and_the_others_are_counted():
    (run,) = run_check(CheckRequest(recipe=NAME, overrides=FAILING, offline=True))
    assert not run.passed
    failure = first_failure([run])
    assert isinstance(failure, RuleFailure)
    failing = [x for x in run.results if x.status == "fail"]
    more = f" (and {len(failing) - 1} more)" if len(failing) > 1 else ""
    assert failure.message == f"{run.title}: rule {failing[0].id} failed: {failing[0].reason}{more}"
    assert failure.fix == failing[0].fix


def test_an_ignored_row_is_a_skip_and_the_run_passes():
    (run,) = run_check(
        CheckRequest(recipe=NAME, overrides=FAILING, ignore=("verl-vllm-floor",), offline=True)
    )
    assert {x.id: x.status for x in run.results}["verl-vllm-floor"] == "skip"


def test_an_unknown_advisory_is_refused_before_any_recipe_is_resolved(monkeypatch):
    from rocmstack.rules import checking

    monkeypatch.setattr(checking, "targets", lambda *a: pytest.fail("resolved before the input was checked"))
    with pytest.raises(InputError, match=r"--ignore-rule advisory:no-such-id: no such advisory"):
        run_check(CheckRequest(recipe=NAME, ignore=("advisory:no-such-id",)))


@pytest.mark.parametrize(("overview", "hush"), [(False, False), (True, False), (False, True)])
def test_the_table_shows_what_needs_attention(capsys, overview, hush):
    runs = run_check(CheckRequest(recipe=NAME, overrides=FAILING, offline=True))
    print_checks(runs, overview=overview, hush=hush)
    out = capsys.readouterr().out
    assert "verl-vllm-floor" in out and "fail" in out
    passing = [x.id for x in runs[0].results if x.status == "pass"]
    # the full table lists the passing rules too; an overview and -q only what needs attention
    assert (passing[0] in out) is not (overview or hush)
