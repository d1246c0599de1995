"""One rollout catalogue: every list of engine names is its, a third engine is one entry and one adapter, and
an unknown name is refused in one place (``Catalogue.entry``) with the names known there."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch

from rocmstack.bench.adapters import run_engine
from rocmstack.bench.rollout import ENGINES, RolloutSpec, engines, run_rollout
from rocmstack.errors import InputError
from rocmstack.gpu.engine_bench import EngineBatch, EngineRequest, EngineRun, Launch
from rocmstack.gpu.rollout import CATALOGUE, REGISTRY, EngineArgs, RolloutEntry, make_engine
from rocmstack.gpu.shapes import BUILTIN_SHAPES
from rocmstack.smoke import config as smoke_config
from rocmstack.smoke import task
from rocmstack.smoke.actors import RolloutWorker
from rocmstack.smoke.config import SmokeOptions, expected_failure, model_config
from rocmstack.smoke.runner import _check_engine
from rocmstack.status import Status

TINY = {
    "vocab_size": 96, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
}  # fmt: skip


# ---- a third engine, as the docs say to add one: an entry and its adapter, here in the test ----


class DummyRollout:
    """Stands in for an image's engine: the smoke's worker only builds it here."""

    name: ClassVar[str] = "dummy"

    def __init__(self, config: dict[str, Any], args: EngineArgs) -> None:
        self.config, self.args = config, args


def run_dummy(req: EngineRequest, tmp: Path, launch: Launch) -> EngineRun:
    """The dummy's bench path: one child process (through the bench's launcher), every batch in it."""
    cmd = [sys.executable, "-c", "print('dummy engine')"]
    proc = launch(cmd, None)
    return EngineRun(
        engine="dummy",
        status=Status.PASS if proc.ok else Status.ERROR,
        command=tuple(cmd),
        version="0.0-test",
        engine_starts=1,
        wall_s=proc.seconds,
        batches=tuple(EngineBatch(batch=b, prefill_s=0.01, total_s=0.05, step_s=0.004) for b in req.batches),
    )


def build_dummy(config: dict[str, Any], args: EngineArgs) -> Any:
    """The dummy's in-process factory: takes EngineArgs as every factory does."""
    return DummyRollout(config, args)


DUMMY = RolloutEntry(name="dummy", build=build_dummy, served=True, bench=run_dummy)


def request(**kw: Any) -> EngineRequest:
    base: dict[str, Any] = {"config": TINY, "batches": (1, 2), "prompt_len": 4, "new_tokens": 6}
    return EngineRequest(
        **(base | {"dtype": "float32", "device": "cpu", "backend": "cpu", "timeout_s": 30} | kw)
    )


def test_every_list_of_engine_names_is_the_catalogues():
    from rocmstack.validate.pipeline import IMAGE_ENGINES, SMOKE_ENGINES

    assert CATALOGUE.names() == tuple(REGISTRY) == ("reference", "kvcache", "vllm", "sglang")
    assert ENGINES == ("reference", "hf", "vllm", "sglang")  # bench --rollout: hf is the bench's own baseline
    assert smoke_config.ENGINES == ("auto", "reference", "kvcache")  # smoke --decoder
    assert smoke_config.ROLLOUTS == ("reference", "vllm", "sglang")  # smoke --rollout
    assert IMAGE_ENGINES == ("vllm", "sglang") and SMOKE_ENGINES == ("vllm", "sglang")
    assert [REGISTRY[n].package for n in ("vllm", "sglang")] == ["vllm", "sglang"]


def test_a_catalogue_with_a_third_engine_is_a_new_one():
    extended = CATALOGUE.adding(DUMMY)
    assert extended.names(bench=True) == ("vllm", "sglang", "dummy")
    assert "dummy" not in CATALOGUE.names() and "dummy" not in REGISTRY  # nothing leaks to the default
    with pytest.raises(ValueError, match="unique"):
        extended.adding(DUMMY)
    with pytest.raises(AttributeError):
        extended.entries = ()  # type: ignore[misc]


def test_the_bench_reaches_a_third_engine_by_name_not_through_the_sglang_branch():
    catalogue = CATALOGUE.adding(DUMMY)
    assert engines(catalogue) == ("reference", "hf", "vllm", "sglang", "dummy")
    run = run_engine("dummy", request(), catalogue)
    assert run.status == Status.PASS and run.engine == "dummy" and run.version == "0.0-test"
    assert run.command[-1] == "print('dummy engine')"  # not SGLang's one-batch benchmark
    # The whole bench: the dummy's rows and its engine record come from its own adapter.
    spec = RolloutSpec(
        shape_name="tiny", config=TINY, batches=(1, 2), prompt_len=4, new_tokens=6, engines=("dummy",),
        device="cpu", dtype="float32", catalogue=catalogue,
    )  # fmt: skip
    report = run_rollout(spec)
    assert [(r["engine"], r["batch"], r["status"]) for r in report["results"]] == [
        ("dummy", 1, Status.PASS),
        ("dummy", 2, Status.PASS),
    ]
    assert report["results"][1]["median_step_ms"] == pytest.approx(4.0)
    assert [e["engine"] for e in report["engines"]] == ["dummy"]
    assert report["engines"][0]["command"][-1] == "print('dummy engine')"


def test_the_smoke_reaches_a_third_engine_by_name_not_through_the_sglang_branch():
    catalogue = CATALOGUE.adding(DUMMY)
    opts = SmokeOptions(rollout="dummy", placement="split", device="cpu", shape="small")
    # SGLang's limits (no split, no CPU) are its entry's, not every engine's that is not vLLM.
    assert opts.validated(catalogue) is opts
    _check_engine("dummy", "cpu", catalogue)
    assert expected_failure("dummy", "stale-weights", catalogue) == "engine_weight_version"
    with pytest.raises(InputError, match="--placement split is not supported: SGLang's weight broadcast"):
        SmokeOptions(rollout="sglang", placement="split").validated(catalogue)
    # The rollout worker builds the dummy through the catalogue, as it builds vLLM or SGLang.
    cfg = model_config("small", vocab_size=task.VOCAB_SIZE, max_positions=64)
    worker_opts = dict(opts.to_dict(), threads=1)
    worker = RolloutWorker(cfg, worker_opts, "cpu", "float32", catalogue=catalogue)
    assert worker.engine_name == "dummy" and isinstance(worker.served, DummyRollout)
    assert worker.served.args.dtype == torch.float32 and worker.served.args.sleep_mode is False


def _refused_by_the_catalogue(err: pytest.ExceptionInfo[InputError]) -> str:
    assert err.traceback[-1].name == "entry"  # raised by Catalogue.entry, whoever asked
    return err.value.one_line()


def test_an_unknown_engine_name_is_refused_in_one_place_with_the_known_names():
    with pytest.raises(InputError) as err:
        CATALOGUE.entry("trt")
    assert (
        _refused_by_the_catalogue(err)
        == "rollout engine 'trt' is not one of reference, kvcache, vllm, sglang"
    )
    # make_engine falls back to the reference engine no more; "auto" still means it.
    with pytest.raises(InputError) as err:
        make_engine(TINY, device="cpu", dtype=torch.float32, max_batch=1, max_seq_len=8, prefer="trt")
    assert _refused_by_the_catalogue(err).endswith(
        "'trt' is not one of auto, reference, kvcache, vllm, sglang"
    )
    # The bench's subprocess path: a name with none is refused, never run as SGLang.
    for name in ("trt", "reference"):
        with pytest.raises(InputError) as err:
            run_engine(name, request())
        assert _refused_by_the_catalogue(err) == f"bench engine '{name}' is not one of vllm, sglang"
    spec = RolloutSpec(
        shape_name="qwen3-0.6b", config=BUILTIN_SHAPES["qwen3-0.6b"], batches=(1,), prompt_len=4,
        new_tokens=4, engines=("reference", "trt"), device="cpu",
    )  # fmt: skip
    with pytest.raises(InputError) as err:  # before the bandwidth copy, before any engine
        run_rollout(spec)
    assert "'trt' is not one of vllm, sglang" in _refused_by_the_catalogue(err)
    # The smoke's options: the same place, the CLI's messages.
    with pytest.raises(InputError) as err:
        SmokeOptions(rollout="trt").validated()
    assert _refused_by_the_catalogue(err) == "--rollout 'trt' is not one of reference, vllm, sglang"
    with pytest.raises(InputError) as err:
        SmokeOptions(engine="vllm").validated()
    assert _refused_by_the_catalogue(err) == "--decoder 'vllm' is not one of auto, reference, kvcache"
    with pytest.raises(InputError) as err:
        SmokeOptions(rollout="dummy").validated()  # the test's engine is in no other test's catalogue
    assert "'dummy' is not one of" in _refused_by_the_catalogue(err)
