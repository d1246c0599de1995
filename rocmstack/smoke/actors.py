"""The two workers of the smoke job. Plain classes; the runner wraps them with ``ray.remote``.

Ray assigns the GPUs: each worker uses ``cuda:0`` of whatever ``CUDA_VISIBLE_DEVICES`` /
``HIP_VISIBLE_DEVICES`` Ray gave it (colocated: both the same GPU at 0.5 each; split: one each).
"""

from __future__ import annotations

import copy
import os
import time
from datetime import timedelta
from typing import Any

import torch

from rocmstack.gpu.rollout import CATALOGUE, Catalogue, make_engine
from rocmstack.gpu.vllm_rollout import broadcast, weight_group
from rocmstack.gpu.weight_sync import (
    TensorSpec,
    device_uuid,
    free_port,
    open_shared_tensor,
    pack_state_dict,
    share_tensor,
    unpack_state_dict,
    use_file_system_sharing,
)
from rocmstack.platform.masks import process_visibility
from rocmstack.smoke import grpo, task

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _visible_devices() -> str | None:
    return os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES")


def _setup_process(device_type: str, threads: int) -> torch.device:
    torch.set_num_threads(threads)
    if device_type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"worker sees no GPU ({process_visibility(os.environ, 0)}); Ray assigned none")
        torch.cuda.set_device(0)
        return torch.device("cuda", 0)
    use_file_system_sharing()
    return torch.device("cpu")


def _join_group(device: torch.device, address: str, rank: int) -> None:
    """The split placement's two-rank group: RCCL/NCCL between GPUs, gloo on CPU."""
    import torch.distributed as dist

    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(
        backend, init_method=address, world_size=2, rank=rank, timeout=timedelta(seconds=300)
    )


def _leave_group() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _probe_logprobs(logits: torch.Tensor, probe: torch.Tensor) -> torch.Tensor:
    """log p(next token) along each probe sequence, [B, L-1], fp32 on CPU."""
    return grpo.gather_logprobs(logits[:, :-1], probe[:, 1:].to(logits.device)).cpu()


class TrainerWorker:
    """Policy + frozen reference; full-sequence log-probs; clipped GRPO update; ships HF-named weights."""

    def __init__(
        self, model_config: dict[str, Any], opts: dict[str, Any], device_type: str, dtype: str
    ) -> None:
        from transformers import AutoConfig, AutoModelForCausalLM

        self.device = _setup_process(device_type, opts["threads"])
        self.opts = opts
        self.ship_dtype = DTYPES[dtype]
        # bf16 runs keep fp32 master weights and compute under autocast, as FSDP/Megatron mixed precision does.
        self.autocast = self.ship_dtype == torch.bfloat16 and self.device.type == "cuda"
        torch.manual_seed(opts["seed"])
        hf_config = AutoConfig.for_model(**model_config)
        self.model = AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32).to(self.device)
        self.ref = copy.deepcopy(self.model).eval().requires_grad_(False)
        self.optim = torch.optim.AdamW(
            self.model.parameters(), lr=opts["lr"], betas=(0.9, 0.99), weight_decay=0.0
        )
        self.step = 0
        self.bucket: torch.Tensor | None = None
        self.stale: dict[str, torch.Tensor] | None = None
        self.probe = task.probe_batch(opts["num_digits"]).to(self.device)
        self.engine_group: Any = None  # the split placement's group with an engine rollout

    def info(self) -> dict[str, Any]:
        return {
            "uuid": device_uuid(self.device),
            "visible": _visible_devices(),
            "params": sum(p.numel() for p in self.model.parameters()),
            "pid": os.getpid(),
            "ip": _node_ip(),
        }

    def _forward(self, model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            return model(input_ids=ids, use_cache=False).logits

    def _response_logits(self, model: torch.nn.Module, seqs: torch.Tensor, prompt_len: int) -> torch.Tensor:
        # Full-sequence forward; position t predicts token t+1, so responses are scored by [P-1, L-1).
        return self._forward(model, seqs)[:, prompt_len - 1 : -1].float() / self.opts["temperature"]

    @torch.no_grad()
    def compute_logprobs(self, seqs: torch.Tensor, prompt_len: int, mask: torch.Tensor) -> dict[str, Any]:
        start = time.perf_counter()
        seqs = seqs.to(self.device)
        mask = mask.to(self.device)
        responses = seqs[:, prompt_len:]
        logits = self._response_logits(self.model, seqs, prompt_len)
        old = grpo.gather_logprobs(logits, responses)
        ref = grpo.gather_logprobs(self._response_logits(self.ref, seqs, prompt_len), responses)
        entropy = grpo.masked_mean(grpo.token_entropy(logits), mask)
        kl = grpo.masked_mean(grpo.k3_kl(old, ref), mask)
        _sync(self.device)
        return {
            "old_logp": old.cpu(),
            "ref_logp": ref.cpu(),
            "entropy": float(entropy),
            "kl": float(kl),
            "time_s": time.perf_counter() - start,
        }

    def train(self, batch: dict[str, torch.Tensor], prompt_len: int, inject: str | None) -> dict[str, Any]:
        start = time.perf_counter()
        if inject == "stale-weights":
            self.stale = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        dev = {k: v.to(self.device) for k, v in batch.items()}
        total = dev["seqs"].shape[0]
        size = total // self.opts["minibatches"]
        order = torch.randperm(total, generator=torch.Generator().manual_seed(self.opts["seed"] + self.step))
        losses, norms, clips, kls, skipped = [], [], [], [], 0
        for i in range(self.opts["minibatches"]):
            idx = order[i * size : (i + 1) * size].to(self.device)
            seqs, mask = dev["seqs"][idx], dev["mask"][idx]
            logits = self._response_logits(self.model, seqs, prompt_len)
            logp = grpo.gather_logprobs(logits, seqs[:, prompt_len:])
            pg_loss, clip_frac = grpo.clipped_policy_loss(
                logp,
                dev["old_logp"][idx],
                dev["advantages"][idx],
                mask,
                eps_low=self.opts["eps_low"],
                eps_high=self.opts["eps_high"],
            )
            kl = grpo.masked_mean(grpo.k3_kl(logp, dev["ref_logp"][idx]), mask)
            loss = pg_loss + self.opts["kl_coef"] * kl
            if inject == "nan-loss" and self.step >= 1:
                loss = loss * float("nan")
            self.optim.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.opts["max_grad_norm"])
            if torch.isfinite(norm):
                self.optim.step()
            else:
                # A non-finite gradient must not poison the weights; the verdict reports it instead.
                skipped += 1
            losses.append(float(loss.detach()))
            norms.append(float(norm))
            clips.append(float(clip_frac))
            kls.append(float(kl.detach()))
        _sync(self.device)
        self.step += 1
        return {
            "loss": sum(losses) / len(losses),
            "grad_norm": max(norms) if all(n == n for n in norms) else float("nan"),
            "clip_frac": sum(clips) / len(clips),
            "kl_train": sum(kls) / len(kls),
            "skipped_updates": skipped,
            "time_s": time.perf_counter() - start,
        }

    # ---- weight sync ----
    def _ship_state(self) -> dict[str, torch.Tensor]:
        return self.stale if self.stale is not None else self.model.state_dict()

    def layout(self) -> dict[str, Any]:
        flat, specs = pack_state_dict(self.model.state_dict(), self.ship_dtype)
        return {"specs": specs, "numel": flat.numel(), "dtype": str(self.ship_dtype).removeprefix("torch.")}

    def share_weights(self) -> dict[str, Any]:
        """Colocated: pack into a bucket kept alive here and hand out its IPC handle."""
        flat, specs = pack_state_dict(self._ship_state(), self.ship_dtype)
        _sync(self.device)
        self.bucket = flat
        return {
            "uuid": device_uuid(self.device),
            "handle": share_tensor(flat),
            "specs": specs,
            "version": self.step,
            "nbytes": flat.numel() * flat.element_size(),
        }

    def release_bucket(self) -> None:
        self.bucket = None
        if self.device.type == "cuda":
            torch.cuda.ipc_collect()

    def free_port(self) -> int:
        return free_port()

    def init_group(self, address: str, rank: int) -> None:
        _join_group(self.device, address, rank)

    def init_engine_group(self, host: str, port: int) -> None:
        """Split with an engine rollout: rank 0 of the engine's weight group (vllm_rollout.weight_group)."""
        self.engine_group = weight_group(host, port, 0, self.device.type)

    @torch.no_grad()
    def perturb_embedding(self, std: float) -> None:
        """The logprob-mismatch fault: this trainer's embedding moves, the rollout's copy does not."""
        embed = self.model.get_input_embeddings().weight
        noise = torch.randn(embed.shape, generator=torch.Generator().manual_seed(self.opts["seed"] + 7))
        embed.add_(noise.to(embed.device) * std)
        self.ref.get_input_embeddings().weight.copy_(embed)  # keeps KL(policy || ref) at 0

    def broadcast_weights(self) -> dict[str, Any]:
        """Split: broadcast the version, then the bucket, from rank 0 (this trainer) to the rollout worker."""
        import torch.distributed as dist

        flat, _ = pack_state_dict(self._ship_state(), self.ship_dtype)
        version = torch.tensor([self.step], dtype=torch.int64, device=self.device)
        if self.engine_group is not None:
            broadcast(self.engine_group, version)
            broadcast(self.engine_group, flat)
        else:
            dist.broadcast(version, src=0)
            dist.broadcast(flat, src=0)
        _sync(self.device)
        return {"version": self.step, "nbytes": flat.numel() * flat.element_size()}

    @torch.no_grad()
    def probe_logprobs(self) -> torch.Tensor:
        return _probe_logprobs(self._forward(self.model, self.probe).float(), self.probe)

    def shutdown(self) -> None:
        if self.engine_group is not None:
            from vllm.distributed.utils import stateless_destroy_torch_distributed_process_group

            stateless_destroy_torch_distributed_process_group(self.engine_group)
            self.engine_group = None
        _leave_group()


class RolloutWorker:
    """Holds its own copy of the weights inside a KV-cache engine; samples responses with log-probs."""

    def __init__(
        self,
        model_config: dict[str, Any],
        opts: dict[str, Any],
        device_type: str,
        dtype: str,
        catalogue: Catalogue = CATALOGUE,
    ) -> None:
        self.device = _setup_process(device_type, opts["threads"])
        self.opts = opts
        self.dtype = DTYPES[dtype]
        batch = opts["prompts_per_step"] * opts["group_size"]
        seq = opts["num_digits"] + 2 + opts["max_new_tokens"]
        # An image's engine as the rollout (vLLM or SGLang: one interface, see gpu/rollout.py); colocated
        # on a GPU it sleeps between rollout and training, as in verl/slime. An in-process rollout's
        # decoder is --decoder's.
        rollout = catalogue.entry(opts["rollout"], flag="--rollout", option=True)
        prefer = rollout.name if rollout.served else opts["engine"]
        self.engine, self.engine_name = make_engine(
            model_config,
            device=str(self.device),
            dtype=self.dtype,
            max_batch=batch,
            max_seq_len=seq + 8,
            prefer=prefer,
            sleep_mode=opts["placement"] == "colocated",
            seed=opts["seed"] + 1,
            catalogue=catalogue,
        )
        self.served: Any = self.engine if rollout.served else None
        self.generator = torch.Generator(device=self.device).manual_seed(opts["seed"] + 1)
        self.probe = task.probe_batch(opts["num_digits"]).to(self.device)
        self.version = -1
        self.specs: list[TensorSpec] = []

    def info(self) -> dict[str, Any]:
        return {
            "uuid": device_uuid(self.device),
            "visible": _visible_devices(),
            "engine": self.engine_name,
            "pid": os.getpid(),
        }

    def generate(self, prompts: torch.Tensor) -> dict[str, Any]:
        start = time.perf_counter()
        out = self.engine.generate(
            prompts.to(self.device),
            self.opts["max_new_tokens"],
            temperature=self.opts["temperature"],
            top_p=self.opts["top_p"],
            generator=self.generator,
        )
        _sync(self.device)
        return {
            "tokens": out.tokens.cpu(),
            "logprobs": out.logprobs.float().cpu(),
            "time_s": time.perf_counter() - start,
        }

    # ---- an engine rollout's memory: sleep between rollout and training, wake to load ----
    def sleep(self) -> dict[str, Any]:
        """Put the engine to sleep; what the process held on the device before and after, per the driver."""
        awake = self.served.memory()
        start = time.perf_counter()
        self.served.sleep()
        seconds = time.perf_counter() - start
        asleep = self.served.memory()
        return {
            "slept": self.served.asleep,
            "baseline": self.served.baseline.nbytes,
            "awake": awake.nbytes,
            "asleep": asleep.nbytes,
            "source": awake.source if awake.nbytes is None else asleep.source,
            "time_s": seconds,
        }

    def wake(self) -> None:
        if self.served is not None:
            self.served.wake_weights()
            self.served.wake_rest()

    def _skip_load(self) -> bool:
        # The stale-weights fault with an engine: after the first load, the engine silently keeps its weights.
        return self.opts["inject"] == "stale-weights" and self.version >= 0

    def load_shared(self, payload: dict[str, Any]) -> int:
        """Colocated: map the trainer's bucket by its IPC handle, copy it into the engine, let it go."""
        mine = device_uuid(self.device)
        if payload["uuid"] != mine:
            raise RuntimeError(
                f"colocated sync needs one device; trainer is on {payload['uuid']}, rollout on {mine}"
            )
        if self.served is not None:
            self.served.wake_weights()
            if not self._skip_load():
                self.served.load_shared(payload["handle"], payload["specs"])
            self.served.wake_rest()
            self.version = payload["version"]
            return self.version
        flat = open_shared_tensor(payload["handle"])
        self.engine.load_hf_state_dict(unpack_state_dict(flat, payload["specs"]))
        _sync(self.device)
        del flat
        self.version = payload["version"]
        return self.version

    def init_group(self, address: str, rank: int, layout: dict[str, Any]) -> None:
        self.specs = layout["specs"]
        self.layout = layout
        if self.served is not None:  # the engine's worker joins; it receives into its own buffer
            host, port = address.removeprefix("tcp://").rsplit(":", 1)
            self.served.join_group(host, int(port), rank)
            return
        _join_group(self.device, address, rank)
        self.recv = torch.empty(layout["numel"], dtype=DTYPES[layout["dtype"]], device=self.device)

    def receive_broadcast(self) -> int:
        import torch.distributed as dist

        if self.served is not None:
            self.served.wake_weights()
            load = not self._skip_load()
            self.version = self.served.receive_broadcast(
                self.specs, self.layout["numel"], self.layout["dtype"], load=load
            )
            self.served.wake_rest()
            return self.version

        version = torch.zeros(1, dtype=torch.int64, device=self.device)
        dist.broadcast(version, src=0)
        dist.broadcast(self.recv, src=0)
        self.engine.load_hf_state_dict(unpack_state_dict(self.recv, self.specs))
        _sync(self.device)
        self.version = int(version)
        return self.version

    @torch.no_grad()
    def probe_logprobs(self) -> torch.Tensor:
        if self.served is not None:
            return self.served.score(self.probe.cpu())  # the engine's prompt log-probs
        return _probe_logprobs(self.engine.forward_logits(self.probe).float(), self.probe)

    def shutdown(self) -> None:
        if self.served is not None:
            self.served.shutdown()
        _leave_group()


def _node_ip() -> str:
    import ray

    return str(ray.util.get_node_ip_address())
