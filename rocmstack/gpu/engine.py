"""A compact reference decode engine for Qwen3-style decoders, in plain PyTorch.

It is the ceiling a real rollout engine in the image should approach, and the rollout side of the GRPO
smoke job. What makes it fast is what makes any decode engine fast, kept readable:

- weights fused where the math allows (q|k|v in one matrix, gate|up in one) so a decode step is few,
  large reads; residual adds ride on the matmul (``addmm``);
- a static KV cache allocated once, so the decode step has fixed shapes and addresses;
- the decode step captured as a CUDA/HIP graph: launch overhead disappears;
- batched prefill through SDPA; sampling (temperature / top-p) on the device, no host syncs per token;
- on GPUs, Triton kernels (kernels.py) fuse the small ops of the decode step (9 launches a layer) and
  read the cache only up to the current position. The plain-PyTorch step (_decode_step) stays the
  readable spec and the CPU path; it attends over the cache up to the next KV_BUCKET boundary, with one
  graph per (batch, bucket).

Weights arrive by HF names (``model.layers.0.self_attn.q_proj.weight``) and are copied in place, so
captured graphs stay valid after a weight sync. All sequences in a batch share one prompt length.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from rocmstack.errors import InputError
from rocmstack.gpu.memory import KV_BUCKET
from rocmstack.gpu.shapes import ModelShape, shape_from_config


@dataclass(frozen=True)
class GenerateOutput:
    tokens: torch.Tensor  # [B, N] sampled token ids
    logprobs: torch.Tensor  # [B, N] log p(token) under the temperature-scaled full distribution
    prefill_seconds: float | None = None  # set when generate(timed=True)
    step_seconds: tuple[float, ...] = ()  # each decode step's device time, when timed


@dataclass
class _Layer:
    ln1: torch.Tensor  # [H]
    qkv: torch.Tensor  # [(Hq + 2 Hkv) D, H]  rows: q | k | v
    qk_norm: torch.Tensor  # [Hq + Hkv, D]  q_norm repeated per q head, then k_norm per kv head
    o: torch.Tensor  # [H, Hq D]
    ln2: torch.Tensor  # [H]
    gate_up: torch.Tensor  # [2 I, H]  rows: gate | up
    down: torch.Tensor  # [H, I]
    k_cache: torch.Tensor  # [max_batch, Hkv, max_seq_len, D]
    v_cache: torch.Tensor


def _rope_tables(
    shape: ModelShape, max_seq_len: int, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sign-folded sin, [S, D]: rope(x) = x * cos + swap_halves(x) * sin_signed.

    swap_halves(x) = [x2, x1]; HF's rotate_half(x) = [-x2, x1] = swap_halves(x) * [-1.., +1..].
    Computed in fp32 and cast, as transformers does.
    """
    d = shape.head_dim
    inv_freq = 1.0 / (shape.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=device) / d))
    freqs = torch.outer(torch.arange(max_seq_len, dtype=torch.float32, device=device), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    sign = torch.cat((-torch.ones(d // 2, device=device), torch.ones(d // 2, device=device)))
    return emb.cos().to(dtype), (emb.sin() * sign).to(dtype)


def _swap_halves(x: torch.Tensor) -> torch.Tensor:
    return x.unflatten(-1, (2, -1)).flip(-2).flatten(-2)


class ReferenceEngine:
    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.bfloat16,
        max_batch: int = 1,
        max_seq_len: int = 512,
        use_graphs: bool = True,
        fused: bool | None = None,
    ) -> None:
        self.shape = s = shape_from_config(config)
        self.device = torch.device(device)
        self.dtype = dtype
        self.max_batch = max_batch
        self.max_seq_len = max_seq_len
        self.use_graphs = use_graphs and self.device.type == "cuda"
        # Fused Triton kernels for the decode step (GPU only); None: use them when Triton is there.
        self._kernels = _load_kernels() if (fused is not False and self.device.type == "cuda") else None
        if fused and self._kernels is None:
            raise InputError("fused=True needs a GPU and Triton", fix="pass fused=None or False")
        if max_batch <= 0 or max_seq_len <= 0:
            raise InputError(f"max_batch={max_batch}, max_seq_len={max_seq_len}: both must be positive")

        def empty(*size: int) -> torch.Tensor:
            return torch.empty(size, device=self.device, dtype=dtype)

        self.embed = empty(s.vocab_size, s.hidden_size)
        self.lm_head = self.embed if s.tie_word_embeddings else empty(s.vocab_size, s.hidden_size)
        self.final_norm = empty(s.hidden_size)
        self.layers = [
            _Layer(
                ln1=empty(s.hidden_size),
                qkv=empty(s.q_size + 2 * s.kv_size, s.hidden_size),
                qk_norm=empty(s.num_heads + s.num_kv_heads, s.head_dim),
                o=empty(s.hidden_size, s.q_size),
                ln2=empty(s.hidden_size),
                gate_up=empty(2 * s.intermediate_size, s.hidden_size),
                down=empty(s.hidden_size, s.intermediate_size),
                k_cache=torch.zeros(
                    max_batch, s.num_kv_heads, max_seq_len, s.head_dim, device=self.device, dtype=dtype
                ),
                v_cache=torch.zeros(
                    max_batch, s.num_kv_heads, max_seq_len, s.head_dim, device=self.device, dtype=dtype
                ),
            )
            for _ in range(s.num_layers)
        ]
        self.cos, self.sin = _rope_tables(s, max_seq_len, self.device, dtype)
        self._positions = torch.arange(max_seq_len, device=self.device)
        # Static inputs of the captured decode step.
        self._tokens = torch.zeros(max_batch, dtype=torch.long, device=self.device)
        self._pos = torch.zeros(1, dtype=torch.long, device=self.device)
        self._graphs: dict[tuple[int, int], tuple[Any, torch.Tensor]] = {}
        self._pool = torch.cuda.graph_pool_handle() if self.use_graphs else None
        self._gemv: dict[str, tuple[int, int, int] | None] = {}  # batch-1 matmul kernel per weight group
        self.gemv_report: dict[str, dict[str, Any]] = {}
        self.fused_fallback: str | None = None
        self.init_random_(seed=0)

    # ---------------------------------------------------------------- weights

    def parameters(self) -> dict[str, torch.Tensor]:
        """Every weight tensor by a stable internal name (for byte counts and tests)."""
        out = {"embed": self.embed, "final_norm": self.final_norm}
        if not self.shape.tie_word_embeddings:
            out["lm_head"] = self.lm_head
        for i, layer in enumerate(self.layers):
            for field in ("ln1", "qkv", "qk_norm", "o", "ln2", "gate_up", "down"):
                out[f"{i}.{field}"] = getattr(layer, field)
        return out

    @torch.no_grad()
    def init_random_(self, seed: int, std: float = 0.02) -> None:
        """HF-style init (normal(0, std) matrices, unit norms), deterministic per seed."""
        gen = torch.Generator(device=self.device).manual_seed(seed)
        for name, tensor in self.parameters().items():
            if tensor.dim() == 1 or name.endswith("qk_norm"):
                tensor.fill_(1.0)
            else:
                tensor.normal_(0.0, std, generator=gen)

    def _hf_targets(self) -> dict[str, torch.Tensor]:
        """HF parameter name -> the view of our (fused) tensor it lands in."""
        s = self.shape
        q, kv, inter = s.q_size, s.kv_size, s.intermediate_size
        targets = {
            "model.embed_tokens.weight": self.embed,
            "model.norm.weight": self.final_norm,
            "lm_head.weight": self.lm_head,
        }
        for i, layer in enumerate(self.layers):
            p = f"model.layers.{i}."
            targets.update(
                {
                    p + "input_layernorm.weight": layer.ln1,
                    p + "post_attention_layernorm.weight": layer.ln2,
                    p + "self_attn.q_proj.weight": layer.qkv[:q],
                    p + "self_attn.k_proj.weight": layer.qkv[q : q + kv],
                    p + "self_attn.v_proj.weight": layer.qkv[q + kv :],
                    p + "self_attn.o_proj.weight": layer.o,
                    p + "self_attn.q_norm.weight": layer.qk_norm[: s.num_heads],
                    p + "self_attn.k_norm.weight": layer.qk_norm[s.num_heads :],
                    p + "mlp.gate_proj.weight": layer.gate_up[:inter],
                    p + "mlp.up_proj.weight": layer.gate_up[inter:],
                    p + "mlp.down_proj.weight": layer.down,
                }
            )
        return targets

    def hf_parameter_names(self) -> list[str]:
        names = list(self._hf_targets())
        return [n for n in names if not (n == "lm_head.weight" and self.shape.tie_word_embeddings)]

    @torch.no_grad()
    def load_hf_state_dict(self, state_dict: Mapping[str, torch.Tensor], *, strict: bool = True) -> int:
        """Copy HF-named weights into the engine in place; returns the bytes copied.

        strict: every parameter must be present (a partial update passes strict=False). Unknown names
        and shape mismatches are always errors. RoPE buffers (``rotary_emb.inv_freq``) are ignored.
        """
        targets = self._hf_targets()
        copied = 0
        seen: set[str] = set()
        for name, src in state_dict.items():
            if name.endswith("rotary_emb.inv_freq"):
                continue
            dst = targets.get(name)
            if dst is None:
                raise InputError(
                    f"state dict: unknown parameter {name!r}", fix="send HF Qwen3 parameter names"
                )
            if name.endswith(("q_norm.weight", "k_norm.weight")) and tuple(src.shape) == (
                self.shape.head_dim,
            ):
                src = src.expand_as(dst)  # one norm vector, repeated per head in our layout
            if tuple(src.shape) != tuple(dst.shape):
                raise InputError(
                    f"state dict: {name} has shape {tuple(src.shape)}, the config needs {tuple(dst.shape)}",
                    fix="the state dict and the config describe different models",
                )
            dst.copy_(src, non_blocking=True)
            copied += dst.numel() * dst.element_size()
            seen.add(name)
        if strict:
            missing = [n for n in self.hf_parameter_names() if n not in seen]
            if missing:
                raise InputError(
                    f"state dict: {len(missing)} parameters missing, first {missing[0]!r}",
                    fix="send the full state dict, or pass strict=False for a partial update",
                )
        return copied

    # ---------------------------------------------------------------- model math

    def _rms_norm(self, x: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), weight, self.shape.rms_norm_eps)

    def _qk_norm_rope(
        self, qkv: torch.Tensor, layer: _Layer, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """qkv [..., (Hq+2Hkv) D] -> q [..., Hq, D], k [..., Hkv, D] (normed, rotated), v [..., Hkv, D]."""
        s = self.shape
        heads = qkv.unflatten(-1, (s.num_heads + 2 * s.num_kv_heads, s.head_dim))
        qk = heads[..., : s.num_heads + s.num_kv_heads, :]
        qk = self._rms_norm(qk, None) * layer.qk_norm
        qk = torch.addcmul(qk * cos, _swap_halves(qk), sin)
        return (
            qk[..., : s.num_heads, :],
            qk[..., s.num_heads :, :],
            heads[..., s.num_heads + s.num_kv_heads :, :],
        )

    def _mlp(self, x: torch.Tensor, layer: _Layer) -> torch.Tensor:
        """x + down(silu(gate(h)) * up(h)), h = rms_norm(x); the residual add rides on addmm."""
        h = self._rms_norm(x, layer.ln2)
        gate, up = F.linear(h, layer.gate_up).chunk(2, dim=-1)
        act = F.silu(gate) * up
        return torch.addmm(x.flatten(0, -2), act.flatten(0, -2), layer.down.t()).view_as(x)

    @torch.no_grad()
    def _prefill(self, input_ids: torch.Tensor, *, all_logits: bool) -> torch.Tensor:
        """Run the prompt through the model, filling the KV cache at positions [0, P)."""
        s = self.shape
        b, p = input_ids.shape
        cos, sin = self.cos[:p].unsqueeze(1), self.sin[:p].unsqueeze(1)  # [P, 1, D]
        x = F.embedding(input_ids, self.embed)  # [B, P, H]
        for layer in self.layers:
            h = self._rms_norm(x, layer.ln1)
            q, k, v = self._qk_norm_rope(F.linear(h, layer.qkv), layer, cos, sin)  # [B, P, heads, D]
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            layer.k_cache[:b, :, :p].copy_(k)
            layer.v_cache[:b, :, :p].copy_(v)
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            attn = attn.transpose(1, 2).reshape(b * p, s.q_size)
            x = torch.addmm(x.view(b * p, -1), attn, layer.o.t()).view(b, p, -1)
            x = self._mlp(x, layer)
        x = self._rms_norm(x if all_logits else x[:, -1], self.final_norm)
        return F.linear(x, self.lm_head).float()

    @property
    def fused(self) -> bool:
        return self._kernels is not None

    @torch.no_grad()
    def _decode_step_fused(self, batch: int) -> torch.Tensor:
        """The same step as _decode_step through kernels.py, 9 launches a layer:

        qkv matmul, qk-norm+RoPE+cache write, attention over [0, pos], o matmul, residual add + RMSNorm,
        gate|up matmul, SiLU*up, down matmul, residual add + next RMSNorm.
        """
        s, k = self.shape, self._kernels
        assert k is not None, "only the fused path calls this"
        eps = s.rms_norm_eps
        gemv = self._gemv if batch == 1 else {}

        def linear(name: str, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return k.gemv(x, w, gemv[name]) if gemv.get(name) else F.linear(x, w)

        x = F.embedding(self._tokens[:batch], self.embed)  # the residual stream, updated in place
        h = k.rms_norm(x, self.layers[0].ln1, eps)
        for i, layer in enumerate(self.layers):
            q = k.qk_norm_rope_store(
                linear("qkv", h, layer.qkv), layer.qk_norm, self.cos, self.sin, self._pos, layer.k_cache,
                layer.v_cache, num_heads=s.num_heads, num_kv_heads=s.num_kv_heads, head_dim=s.head_dim, eps=eps,
            )  # fmt: skip
            attn = k.decode_attention(
                q,
                layer.k_cache,
                layer.v_cache,
                self._pos,
                num_kv_heads=s.num_kv_heads,
                scale=s.head_dim**-0.5,
            )
            h = k.add_rms_norm(x, linear("o", attn.view(batch, s.q_size), layer.o), layer.ln2, eps)
            act = k.silu_mul(linear("gate_up", h, layer.gate_up))
            following = self.layers[i + 1].ln1 if i + 1 < len(self.layers) else self.final_norm
            h = k.add_rms_norm(x, linear("down", act, layer.down), following, eps)
        return linear("lm_head", h, self.lm_head)

    @torch.no_grad()
    def _tune_gemv(self) -> None:
        """Batch 1: per weight shape, time cuBLAS and each Triton GEMV config over every layer's weights.

        Keeps the fastest that also matches cuBLAS; timing all layers' matrices in turn keeps the L2
        cache out of it. The choice and the times land in self.gemv_report.
        """
        k = self._kernels
        assert k is not None, "only the fused path tunes its GEMV"
        groups = {
            "qkv": [layer.qkv for layer in self.layers],
            "o": [layer.o for layer in self.layers],
            "gate_up": [layer.gate_up for layer in self.layers],
            "down": [layer.down for layer in self.layers],
            "lm_head": [self.lm_head],
        }

        def timed(fn: Callable[[], object]) -> float:
            times = []
            for _ in range(4):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            return float(sorted(times)[1])

        for name, weights in groups.items():
            x = torch.randn(1, weights[0].shape[1], device=self.device, dtype=self.dtype)
            expected = [F.linear(x, w).float() for w in weights[:2]]
            best_ms = cublas_ms = timed(functools.partial(_linear_all, x, weights))
            choice = None
            for config in k.GEMV_CONFIGS:
                got = [k.gemv(x, w, config).float() for w in weights[:2]]
                if any((g - e).norm() > 1e-2 * e.norm() for g, e in zip(got, expected, strict=True)):
                    continue
                ms = timed(functools.partial(_gemv_all, k, x, weights, config))
                if ms < best_ms:
                    best_ms, choice = ms, config
            self._gemv[name] = choice
            self.gemv_report[name] = {
                "choice": list(choice) if choice else "cublas",
                "cublas_ms": cublas_ms,
                "best_ms": best_ms,
            }

    @torch.no_grad()
    def _decode_step(self, batch: int, kv_len: int) -> torch.Tensor:
        """One token per sequence at position self._pos, attending to cache[:kv_len]; bf16 logits [B, V].

        Reads only static buffers (self._tokens, self._pos, weights, cache), so it can be captured.
        """
        s = self.shape
        groups = s.num_heads // s.num_kv_heads
        scale = s.head_dim**-0.5
        cos, sin = self.cos[self._pos], self.sin[self._pos]  # [1, D]
        # Additive mask over the bucket: positions after the current one are not written yet.
        mask = torch.where(self._positions[:kv_len] <= self._pos, 0.0, float("-inf")).to(self.dtype)
        x = F.embedding(self._tokens[:batch], self.embed)  # [B, H]
        for layer in self.layers:
            h = self._rms_norm(x, layer.ln1)
            q, k, v = self._qk_norm_rope(F.linear(h, layer.qkv), layer, cos, sin)  # [B, heads, D]
            layer.k_cache[:batch].index_copy_(2, self._pos, k.unsqueeze(2))
            layer.v_cache[:batch].index_copy_(2, self._pos, v.unsqueeze(2))
            # GQA as batched matmuls: the `groups` q heads of one kv head are the rows of one product.
            keys = layer.k_cache[:batch, :, :kv_len].flatten(0, 1)  # [B*Hkv, L, D] (a view)
            values = layer.v_cache[:batch, :, :kv_len].flatten(0, 1)
            q = q.reshape(batch * s.num_kv_heads, groups, s.head_dim)
            scores = torch.baddbmm(mask.expand(1, 1, kv_len), q, keys.transpose(1, 2), alpha=scale)
            attn = torch.bmm(torch.softmax(scores, dim=-1), values).view(batch, s.q_size)
            x = torch.addmm(x, attn, layer.o.t())
            x = self._mlp(x, layer)
        return F.linear(self._rms_norm(x, self.final_norm), self.lm_head)

    def _step_logits(self, batch: int, pos: int) -> torch.Tensor:
        if not self.fused:
            return self._run_step(batch, pos)
        try:
            return self._run_step(batch, pos)
        except Exception as exc:
            reason = _kernel_failure(exc)
            if reason is None:
                raise
        # A kernel that does not compile or launch on this GPU (a new arch, a tighter LDS limit): the plain
        # step computes the same logits, only slower. The reason is kept for the bench report.
        self.fused_fallback = (
            f"Triton decode kernels unavailable on this GPU, plain PyTorch step used: {reason}"
        )
        self._kernels = None
        self._graphs.clear()
        return self._run_step(batch, pos)

    def _run_step(self, batch: int, pos: int) -> torch.Tensor:
        if self.fused:  # attention length is read on the device: one graph per batch size
            if batch == 1 and not self.gemv_report:
                self._tune_gemv()
            kv_len, step = 0, lambda: self._decode_step_fused(batch)
        else:
            kv_len = min(-(-(pos + 1) // KV_BUCKET) * KV_BUCKET, self.max_seq_len)

            def step() -> Any:
                return self._decode_step(batch, kv_len)

        if not self.use_graphs:
            return step()
        key = (batch, kv_len)
        if key not in self._graphs:
            # Warm up on a side stream (cuBLAS handles, workspaces, Triton JIT), then capture into the shared pool.
            stream = torch.cuda.Stream(device=self.device)
            stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(stream):
                step()
            torch.cuda.current_stream(self.device).wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool):
                out = step()
            self._graphs[key] = (graph, out)
        graph, out = self._graphs[key]
        graph.replay()
        return out

    # ---------------------------------------------------------------- sampling and the public API

    def _check_ids(self, input_ids: torch.Tensor, extra: int) -> None:
        if input_ids.dim() != 2 or input_ids.dtype != torch.long:
            raise InputError(
                f"input_ids must be a LongTensor[B, P], got {input_ids.dtype} {tuple(input_ids.shape)}"
            )
        b, p = input_ids.shape
        if not 0 < b <= self.max_batch:
            raise InputError(
                f"batch {b} exceeds max_batch={self.max_batch}",
                fix="create the engine with a larger max_batch",
            )
        if p == 0 or p + extra > self.max_seq_len:
            raise InputError(
                f"prompt {p} + new tokens {extra} exceeds max_seq_len={self.max_seq_len}",
                fix="create the engine with a larger max_seq_len",
            )

    @torch.no_grad()
    def forward_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Full-sequence fp32 logits [B, P, V] (overwrites the KV cache rows it uses)."""
        self._check_ids(input_ids, 0)
        return self._prefill(input_ids.to(self.device), all_logits=True)

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        generator: torch.Generator | None = None,
        timed: bool = False,
        on_token: Callable[[int], None] | None = None,
    ) -> GenerateOutput:
        """Sample exactly max_new_tokens per sequence (no EOS stop: RL rollouts mask after EOS themselves).

        on_token(n) is called on the host after the n-th token is queued (progress; it never syncs)."""
        if max_new_tokens <= 0:
            raise InputError(f"max_new_tokens={max_new_tokens} must be positive")
        if not 0.0 < top_p <= 1.0:
            raise InputError(f"top_p={top_p} must be in (0, 1]")
        self._check_ids(input_ids, max_new_tokens)
        input_ids = input_ids.to(self.device)
        b, p = input_ids.shape
        tokens = torch.empty(b, max_new_tokens, dtype=torch.long, device=self.device)
        logprobs = torch.empty(b, max_new_tokens, dtype=torch.float32, device=self.device)
        events = Events(self.device, timed)

        events.mark()
        logits = self._prefill(input_ids, all_logits=False)
        tokens[:, 0], logprobs[:, 0] = sample(logits, temperature, top_p, generator)
        events.mark()
        if on_token is not None:
            on_token(1)
        for i in range(1, max_new_tokens):
            self._tokens[:b].copy_(tokens[:, i - 1])
            self._pos.fill_(p + i - 1)
            logits = self._step_logits(b, p + i - 1)
            tokens[:, i], logprobs[:, i] = sample(logits, temperature, top_p, generator)
            events.mark()
            if on_token is not None:
                on_token(i + 1)
        times = events.seconds()
        return GenerateOutput(
            tokens=tokens,
            logprobs=logprobs,
            prefill_seconds=times[0] if timed else None,
            step_seconds=tuple(times[1:]),
        )


def sample(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (token [B], log p(token) under softmax(logits / T)). T == 0 means greedy (log p at T=1).

    Every rollout engine here samples with this, so their log-probs mean the same thing."""
    logits = logits.float()
    if temperature > 0:
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1)
    if temperature <= 0:
        token = logp.argmax(dim=-1)
    else:
        # Exponential race: argmax(p / E), E ~ Exp(1), draws from p without a host sync.
        noise = torch.empty_like(logp).exponential_(generator=generator)
        if top_p < 1.0:
            probs, order = logp.exp().sort(dim=-1, descending=True)
            outside = probs.cumsum(dim=-1) - probs >= top_p  # keep the smallest prefix with mass >= top_p
            probs = probs.masked_fill(outside, 0.0)
            token = order.gather(-1, (probs / noise).argmax(dim=-1, keepdim=True)).squeeze(-1)
        else:
            token = (logp - noise.log()).argmax(dim=-1)
    return token, logp.gather(-1, token.unsqueeze(-1)).squeeze(-1)


def _linear_all(x: torch.Tensor, weights: list[torch.Tensor]) -> list[torch.Tensor]:
    return [F.linear(x, w) for w in weights]


def _gemv_all(k: Any, x: torch.Tensor, weights: list[torch.Tensor], config: Any) -> list[torch.Tensor]:
    return [k.gemv(x, w, config) for w in weights]


def _kernel_failure(exc: BaseException) -> str | None:
    """One line naming a Triton compile or launch-resource failure; None for any other error."""
    try:
        from triton.compiler.errors import CompilationError
        from triton.runtime.errors import OutOfResources
    except ImportError:
        return None
    if not isinstance(exc, (CompilationError, OutOfResources)):
        return None
    first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return f"{type(exc).__name__}: {first.strip()}"


def _load_kernels():
    try:
        from rocmstack.gpu import kernels
    except ImportError:  # no Triton in this environment: the plain-PyTorch step
        return None
    return kernels


class Events:
    """Device-side timestamps between phases; read once at the end, so the loop never syncs."""

    def __init__(self, device: torch.device, enabled: bool) -> None:
        self.device, self.enabled = device, enabled
        self.marks: list[Any] = []

    def mark(self) -> None:
        if not self.enabled:
            return
        if self.device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def seconds(self) -> list[float]:
        if not self.enabled or len(self.marks) < 2:
            return []
        if self.device.type == "cuda":
            self.marks[-1].synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(self.marks)]
        return [b - a for a, b in itertools.pairwise(self.marks)]
