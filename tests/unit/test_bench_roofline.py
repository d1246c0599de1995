from __future__ import annotations

import pytest

from rocmstack.bench.roofline import SPEC_TABLE, decode_bytes, lookup_spec, mbu, roofline_tokens_per_s
from rocmstack.gpu.shapes import ModelShape


@pytest.mark.parametrize(
    ("device_name", "expected", "tb_s"),
    [
        ("AMD Instinct MI300X", "MI300X", 5.3),
        ("AMD Instinct MI300X VF", "MI300X", 5.3),
        ("AMD Instinct MI325X", "MI325X", 6.0),
        ("AMD Instinct MI355X", "MI355X", 8.0),
        ("NVIDIA H200", "H200", 4.8),
        ("NVIDIA H100 80GB HBM3", "H100", 3.35),
        ("NVIDIA H100 PCIe", "H100 PCIe", 2.0),
    ],
)
def test_spec_lookup(device_name, expected, tb_s):
    spec = lookup_spec(device_name)
    assert spec is not None and spec.name == expected and spec.hbm_tb_per_s == tb_s


@pytest.mark.parametrize(
    ("arch", "memory_gb", "expected"),
    [("gfx942:sramecc+:xnack-", 205.8, "MI300X"), ("gfx942:sramecc+:xnack-", 274.9, "MI325X"),
     ("gfx950:sramecc+:xnack-", 309.2, "MI355X"), ("gfx90a:sramecc+:xnack-", 68.7, "MI250X")],
)  # fmt: skip
def test_rocm_parts_named_generically_fall_back_to_the_gfx_target(arch, memory_gb, expected):
    spec = lookup_spec("AMD Radeon Graphics", gcn_arch=arch, memory_gb=memory_gb)
    assert spec is not None and spec.name == expected
    assert lookup_spec("AMD Radeon Graphics", gcn_arch="gfx1100", memory_gb=24.0) is None


def test_unknown_device_has_no_spec_and_table_names_are_unique():
    assert lookup_spec("Intel Arc A770") is None
    assert len({s.name for s in SPEC_TABLE}) == len(SPEC_TABLE)


SHAPE = ModelShape(
    vocab_size=10, hidden_size=4, intermediate_size=8, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=2,
    rms_norm_eps=1e-6, rope_theta=1e4, tie_word_embeddings=False,
)  # fmt: skip


def test_decode_bytes_by_hand():
    # layer: qkv 4x(4+2+2)=32, o 4x4=16, mlp 3x4x8=96, norms 2x4 + 2x2=12 -> 156; x2 layers + norm 4 + head 40
    assert SHAPE.params_read_per_step() == 2 * 156 + 4 + 40
    b = decode_bytes(SHAPE, batch=3, prompt_len=10, new_tokens=5, dtype_bytes=2)
    assert b.weights == 356 * 2
    # decode steps attend over 11..14 positions: mean 12.5; kv bytes/token = 2 x 2 layers x 2 dims x 2 bytes
    assert b.kv == pytest.approx(3 * 12.5 * 16)


def test_running_at_the_roofline_is_mbu_one():
    b = decode_bytes(SHAPE, batch=8, prompt_len=100, new_tokens=50, dtype_bytes=2)
    roof = roofline_tokens_per_s(b, batch=8, bandwidth_bytes_per_s=1e12)
    assert mbu(roof, b, batch=8, bandwidth_bytes_per_s=1e12) == pytest.approx(1.0)
    assert mbu(roof / 2, b, batch=8, bandwidth_bytes_per_s=2e12) == pytest.approx(0.25)
