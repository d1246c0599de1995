"""Every Triton kernel of the reference engine's fused decode step, compiled for AMD Instinct targets.

No AMD GPU is needed: Triton's HIP backend compiles to a code object (hsaco) on any machine. Each kernel
is compiled at the shapes and batches the rollout bench uses, for gfx942 (MI300X/MI325X) and gfx950
(MI350X/MI355X) with 64-wide wavefronts, and its LDS use is held to the target's limit (a kernel over it
compiles but cannot launch).
"""

from __future__ import annotations

import re

import pytest

triton = pytest.importorskip("triton")

from rocmstack.gpu import kernels  # noqa: E402  (after the importorskip)
from rocmstack.gpu.shapes import BUILTIN_SHAPES, shape_from_config  # noqa: E402  (after the importorskip)

# Per target: compute units (they set the attention splits) and LDS bytes per workgroup.
# Source: AMD ROCm docs, "GPU hardware specifications" table (MI300X: 304 CUs, 64 KiB LDS;
# MI355X: 256 CUs, 160 KiB LDS).
TARGETS = {"gfx942": (304, 64 * 1024), "gfx950": (256, 160 * 1024)}
WAVEFRONT = 64
BENCH_BATCHES = (1, 64, 256)  # `rocmstack bench rollout` defaults
EM_AMDGPU = 224  # ELF e_machine of AMD GPU code objects


@pytest.fixture(scope="module", autouse=True)
def _fresh_cache(tmp_path_factory):
    # A fresh Triton cache, so each case is a real compile, never a hit from an earlier run.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton-cache")))
        mp.setenv("TRITON_DEFAULT_FP_FUSION", "1")
        yield


def _cases():
    for arch, (units, _lds) in TARGETS.items():
        for name, config in BUILTIN_SHAPES.items():
            shape = shape_from_config(config)
            seen = set()
            for batch in BENCH_BATCHES:
                for launch in kernels.decode_launches(shape, batch, "bf16", units):
                    key = (launch.name, tuple(sorted(launch.constexprs.items())))
                    if key not in seen:  # the same specialisation at another batch compiles the same
                        seen.add(key)
                        yield pytest.param(arch, launch, id=f"{arch}-{name}-b{batch}-{launch.name}")


@pytest.mark.parametrize(("arch", "launch"), list(_cases()))
def test_kernel_compiles_for_amd(arch, launch):
    compiled = kernels.compile_launch(launch, "hip", arch, WAVEFRONT)
    hsaco = compiled.asm["hsaco"]
    assert hsaco[:4] == b"\x7fELF" and int.from_bytes(hsaco[18:20], "little") == EM_AMDGPU
    assert re.search(rf'\.amdgcn_target ".*-amd-amdhsa-.*{arch}"', compiled.asm["amdgcn"])
    assert compiled.metadata.warp_size == WAVEFRONT
    assert compiled.metadata.shared <= TARGETS[arch][1], f"{launch.name} needs {compiled.metadata.shared} B"


def test_every_kernel_of_the_decode_step_is_listed():
    """decode_launches() must name every @triton.jit kernel of the module, or the compile test misses one."""
    shape = shape_from_config(BUILTIN_SHAPES["qwen3-8b"])
    listed = {
        launch.fn.fn.__name__
        for batch in BENCH_BATCHES
        for launch in kernels.decode_launches(shape, batch, "bf16", TARGETS["gfx942"][0])
    }
    jitted = {name for name, obj in vars(kernels).items() if isinstance(obj, triton.runtime.JITFunction)}
    assert listed == jitted
