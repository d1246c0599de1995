"""The two workers in one process (the Ray wiring is covered by tests/integration/test_smoke_runner.py)."""

from __future__ import annotations

import pytest
import torch

from rocmstack.gpu.weight_sync import unpack_state_dict
from rocmstack.smoke import grpo, task
from rocmstack.smoke.actors import RolloutWorker, TrainerWorker
from rocmstack.smoke.config import SmokeOptions, model_config


@pytest.fixture()
def workers():
    opts = dict(
        SmokeOptions(
            device="cpu", prompts_per_step=4, group_size=4, minibatches=2, engine="kvcache"
        ).to_dict(),
        threads=1,
    )
    cfg = model_config("tiny", vocab_size=task.VOCAB_SIZE, max_positions=64)
    trainer = TrainerWorker(cfg, opts, "cpu", "float32")
    rollout = RolloutWorker(cfg, opts, "cpu", "float32")
    return opts, trainer, rollout


def _batch(opts, trainer, rollout):
    prompts = task.make_prompts(opts["prompts_per_step"], 4, torch.Generator().manual_seed(0))
    prompts = prompts.repeat_interleave(opts["group_size"], 0)
    out = rollout.generate(prompts)
    mask = task.response_mask(out["tokens"])
    seqs = torch.cat([prompts, out["tokens"]], 1)
    lp = trainer.compute_logprobs(seqs, 6, mask)
    rewards = torch.arange(seqs.shape[0]).remainder(2).float()  # every group has signal
    batch = {
        "seqs": seqs,
        "mask": mask,
        "advantages": grpo.group_advantages(rewards, opts["group_size"]),
        "old_logp": lp["old_logp"],
        "ref_logp": lp["ref_logp"],
    }
    return out, lp, batch


def _load_shared(trainer, rollout):
    payload = trainer.share_weights()
    rollout.load_shared(payload)
    trainer.release_bucket()
    return payload


def test_sync_then_trainer_and_rollout_agree(workers):
    opts, trainer, rollout = workers
    assert (trainer.probe_logprobs() - rollout.probe_logprobs()).abs().max() > 1e-3  # different random init
    payload = _load_shared(trainer, rollout)
    assert payload["nbytes"] == 4 * trainer.info()["params"]
    torch.testing.assert_close(rollout.probe_logprobs(), trainer.probe_logprobs(), atol=1e-5, rtol=0)
    out, lp, _ = _batch(opts, trainer, rollout)
    assert lp["kl"] == 0.0  # policy == reference before any update
    torch.testing.assert_close(lp["old_logp"], out["logprobs"], atol=1e-5, rtol=0)


def test_train_step_moves_weights_and_reports(workers):
    opts, trainer, rollout = workers
    _load_shared(trainer, rollout)
    before = trainer.probe_logprobs()
    _, _, batch = _batch(opts, trainer, rollout)
    out = trainer.train(batch, 6, None)
    assert out["grad_norm"] > 0 and out["skipped_updates"] == 0
    assert 0.0 <= out["clip_frac"] <= 1.0
    assert (trainer.probe_logprobs() - before).abs().max() > 0


def test_stale_injection_ships_the_weights_from_before_the_update(workers):
    opts, trainer, rollout = workers
    _load_shared(trainer, rollout)
    old = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    _, _, batch = _batch(opts, trainer, rollout)
    trainer.train(batch, 6, "stale-weights")
    payload = trainer.share_weights()
    from rocmstack.gpu.weight_sync import open_shared_tensor

    shipped = unpack_state_dict(open_shared_tensor(payload["handle"]), payload["specs"])
    assert all(torch.equal(shipped[k], old[k]) for k in old)


def test_nan_loss_injection_skips_the_update(workers):
    opts, trainer, rollout = workers
    _load_shared(trainer, rollout)
    _, _, batch = _batch(opts, trainer, rollout)
    trainer.train(batch, 6, "nan-loss")  # step 0 is left clean
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    out = trainer.train(batch, 6, "nan-loss")
    assert out["skipped_updates"] == opts["minibatches"]
    assert out["loss"] != out["loss"]  # NaN is reported, not hidden
    assert all(torch.equal(v, before[k]) for k, v in trainer.model.state_dict().items())


def test_colocated_load_refuses_another_device(workers):
    _, trainer, rollout = workers
    payload = dict(trainer.share_weights(), uuid="GPU-other")
    with pytest.raises(RuntimeError, match="colocated sync needs one device"):
        rollout.load_shared(payload)
