# syntax=docker/dockerfile:1.7
# Rendered by rocmstack 0.1.0 from recipe verl-0.9.0-rocm10 for gfx942;gfx950. Do not edit: re-render.
# render hash @render-hash@
# Layers run from least to most often changed, so bumping one pin rebuilds only its layer and later.
FROM rocm/primus:v26.7
# Every RUN below runs `bash -o pipefail -c` itself (exec form, written by the renderer): the OCI image format
# has no SHELL.
USER 0
WORKDIR /

# Compile-time jobs: lower it if a source build (vLLM, sgl-kernel) runs out of memory.
ARG MAX_JOBS="64"
# Set, pip byte-compiles into .pyc files checked by hash, not stamped with the install time, so two builds
# of one render give the same layers (compilers read it for __DATE__). A constant: the layer cache holds.
ARG SOURCE_DATE_EPOCH=0
# Every GPU-code build below targets exactly these archs.
ENV PYTORCH_ROCM_ARCH="gfx942;gfx950" \
    AMDGPU_TARGETS="gfx942;gfx950" \
    GPU_TARGETS="gfx942;gfx950" \
    AMDGPU_TARGET="gfx942;gfx950" \
    GPU_ARCHS="gfx942;gfx950" \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# --- guards (early): freeze the base's torch stack for every later pip install ---
COPY --chmod=0755 rocmstack/bin/ /opt/rocmstack/bin/
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/guard.py freeze torch==2.12.0 torchvision torchaudio triton"]
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/guard.py python 3.12"]
ENV PIP_CONSTRAINT=/opt/rocmstack/constraints.txt

# --- system ---

# --- amdsmi: ROCm SDK fixes and amdsmi: without amdsmi Ray's AMD detector reports 0 GPUs ---

COPY --chmod=0644 rocmstack/patches/amdsmi-install.json /opt/rocmstack/patches/amdsmi-install.json
COPY --chmod=0644 rocmstack/patches/rtld-local.json /opt/rocmstack/patches/rtld-local.json
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/apply_patches.py /opt/rocmstack/patches/amdsmi-install.json /opt/rocmstack/patches/rtld-local.json"]

# --- ray: Ray ---
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install \
      \"ray[default,serve]==2.58.0\""]

# --- megatron: Megatron-Core and its bridge ---
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install \
      \"megatron-core==0.18.0\""]

# mbridge: https://github.com/ISEEKYAN/mbridge.git @ main
RUN ["/bin/bash", "-o", "pipefail", "-c", "git clone -q --depth 1 --branch main https://github.com/ISEEKYAN/mbridge.git /opt/src/mbridge \
 && git -C /opt/src/mbridge rev-parse HEAD > /opt/rocmstack/refs.mbridge"]
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/mbridge"]

# --- vllm: vLLM (built from source for the archs above) ---
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install \
      \"z3-solver==4.15.*\""]

# vllm: https://github.com/vllm-project/vllm.git @ v0.27.0 (0.27.0)
RUN ["/bin/bash", "-o", "pipefail", "-c", "git clone -q --depth 1 --branch v0.27.0 https://github.com/vllm-project/vllm.git /opt/src/vllm \
 && git -C /opt/src/vllm rev-parse HEAD > /opt/rocmstack/refs.vllm"]
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install -r /opt/src/vllm/requirements/rocm.txt"]
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "VLLM_TARGET_DEVICE=\"rocm\" \
    MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/vllm"]
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/guard.py pin vllm==0.27.0"]

COPY --chmod=0644 rocmstack/patches/libz3-soname.json /opt/rocmstack/patches/libz3-soname.json
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/apply_patches.py /opt/rocmstack/patches/libz3-soname.json"]

# --- sglang: SGLang and sgl-kernel (re-validate when the base or vLLM moves) ---

# sgl-kernel: https://github.com/sgl-project/sglang.git @ 0801cc05ed202544e2e5c67d6b0a1d454de54fca
RUN ["/bin/bash", "-o", "pipefail", "-c", "git init -q /opt/src/sgl-kernel \
 && git -C /opt/src/sgl-kernel remote add origin https://github.com/sgl-project/sglang.git \
 && git -C /opt/src/sgl-kernel fetch -q --depth 1 origin 0801cc05ed202544e2e5c67d6b0a1d454de54fca \
 && git -C /opt/src/sgl-kernel checkout -q --detach FETCH_HEAD \
 && test \"$(git -C /opt/src/sgl-kernel rev-parse HEAD)\" = 0801cc05ed202544e2e5c67d6b0a1d454de54fca"]
WORKDIR /opt/src/sgl-kernel/sgl-kernel
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "MAX_JOBS=\"${MAX_JOBS}\" python3 setup_rocm.py install"]
WORKDIR /

# sglang: https://github.com/sgl-project/sglang.git @ 0801cc05ed202544e2e5c67d6b0a1d454de54fca (0.5.19)
# (same checkout as /opt/src/sgl-kernel)
# sglang's requirements as the recipe lists them (a lock installs them hash-checked with the layer)
COPY rocmstack/requires/sglang.txt /opt/rocmstack/requires/sglang.txt
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install -r /opt/rocmstack/requires/sglang.txt"]
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/sgl-kernel/python"]
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/guard.py pin sglang==0.5.19"]

COPY --chmod=0644 rocmstack/patches/sglang-rmsnorm.json /opt/rocmstack/patches/sglang-rmsnorm.json
COPY --chmod=0644 rocmstack/patches/sglang-qwen3-asr.json /opt/rocmstack/patches/sglang-qwen3-asr.json
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/apply_patches.py /opt/rocmstack/patches/sglang-rmsnorm.json /opt/rocmstack/patches/sglang-qwen3-asr.json"]

# --- verl: verl and its Python stack ---
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install \
      \"accelerate>=1.14.0\" \
      \"cupy-rocm-7-0==14.2.0\" \
      \"torchao>=0.16.0\" \
      \"transformers>=5.12\""]

# flash-linear-attention: https://github.com/fla-org/flash-linear-attention.git @ main
RUN ["/bin/bash", "-o", "pipefail", "-c", "git clone -q --depth 1 --branch main https://github.com/fla-org/flash-linear-attention.git /opt/src/flash-linear-attention \
 && git -C /opt/src/flash-linear-attention rev-parse HEAD > /opt/rocmstack/refs.flash-linear-attention"]
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/flash-linear-attention"]

# verl: https://github.com/AMD-Ecosystem/verl.git @ release/0.9.0.amd0 (0.9.0)
RUN ["/bin/bash", "-o", "pipefail", "-c", "git clone -q --depth 1 --branch release/0.9.0.amd0 https://github.com/AMD-Ecosystem/verl.git /opt/src/verl \
 && git -C /opt/src/verl rev-parse HEAD > /opt/rocmstack/refs.verl"]
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/verl"]
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/guard.py pin verl==0.9.0"]

COPY --chmod=0644 rocmstack/patches/verl-rollout-defaults.json /opt/rocmstack/patches/verl-rollout-defaults.json
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/apply_patches.py /opt/rocmstack/patches/verl-rollout-defaults.json"]

# --- env: runtime defaults (last, so changing one rebuilds nothing above) ---
ENV HIP_FORCE_DEV_KERNARG="1" \
    HSA_NO_SCRATCH_RECLAIM="1" \
    NCCL_MIN_NCHANNELS="112" \
    SGLANG_ATTENTION_BACKEND="triton" \
    SGLANG_USE_AITER="0" \
    VLLM_FP8_ACT_PADDING="1" \
    VLLM_FP8_PADDING="1" \
    VLLM_FP8_REDUCE_CONV="1" \
    VLLM_FP8_WEIGHT_PADDING="1" \
    VLLM_ROCM_USE_AITER="1" \
    VLLM_WORKER_MULTIPROC_METHOD="spawn"

# --- rocmstack itself: `rocmstack validate` runs the image's own copy (same source revision as the lock) ---
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install \"cyclonedx-python-lib<12,>=11\" \"jinja2>=3.1\" \"packaging>=24.0\" \"pydantic>=2.7\" \"pyyaml>=6.0\" \"rich>=13.7\" \"typer>=0.12\" \"uv>=0.13\""]
COPY rocmstack/src/ /opt/rocmstack/src/
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 -c \"import site; open(site.getsitepackages()[0] + '/rocmstack.pth', 'w').write('/opt/rocmstack/src\\n')\" \
 && printf '#!/bin/sh\\nexec python3 -m rocmstack \"$@\"\\n' > /usr/local/bin/rocmstack \
 && chmod 0755 /usr/local/bin/rocmstack \
 && rocmstack --version"]

# The image's SBOM (CycloneDX JSON, built from the lock): `rocmstack inspect --sbom IMAGE` prints it.
COPY --chmod=0644 rocmstack/sbom.cdx.json /opt/rocmstack/sbom.cdx.json

# --- guards (final) and provenance ---
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/guard.py final --require-hip --forbid-nvidia"]
# Source revision and creation time are build args so this file stays identical across commits.
ARG ROCMSTACK_REVISION=unknown
ARG ROCMSTACK_CREATED=1970-01-01T00:00:00Z
LABEL org.opencontainers.image.revision="${ROCMSTACK_REVISION}" \
      org.opencontainers.image.created="${ROCMSTACK_CREATED}" \
      dev.rocmstack.gpu-archs="gfx942;gfx950" \
      dev.rocmstack.patches="rtld-local,amdsmi-install,libz3-soname,sglang-rmsnorm,sglang-qwen3-asr,verl-rollout-defaults" \
      dev.rocmstack.pins="base:rocm/primus:v26.7,python:3.12,rocm:10.0,torch:2.12.0,accelerate:>=1.14.0,amdsmi:sdk,cupy-rocm-7-0:14.2.0,flash-linear-attention:main,mbridge:main,megatron-core:0.18.0,ray:2.58.0,rocm-sdk:10.0,sgl-kernel:0801cc05ed202544e2e5c67d6b0a1d454de54fca,sglang:0801cc05ed202544e2e5c67d6b0a1d454de54fca,torchao:>=0.16.0,transformers:>=5.12,verl:release/0.9.0.amd0,vllm:v0.27.0,z3-solver:==4.15.*" \
      dev.rocmstack.recipe="verl-0.9.0-rocm10" \
      dev.rocmstack.render-hash="@render-hash@" \
      dev.rocmstack.version="0.1.0" \
      org.opencontainers.image.base.name="rocm/primus:v26.7" \
      org.opencontainers.image.description="verl 0.9.0.amd0 with vLLM 0.27.0 and SGLang on ROCm 10.0 (Primus v26.7)" \
      org.opencontainers.image.title="rocmstack verl-0.9.0-rocm10" \
      org.opencontainers.image.vendor="rocmstack"
COPY --chmod=0644 rocmstack/lock.json /opt/rocmstack/lock.json
# The recipe's framework smoke (`rocmstack smoke framework`): validate runs it from here, so an image built
# from a recipe that is not shipped with rocmstack still runs its framework's own loop.
COPY --chmod=0644 rocmstack/framework-smoke.json /opt/rocmstack/framework-smoke.json

# Run as the non-root user verl (numeric, so runAsNonRoot can verify it), in the groups that own /dev/kfd and /dev/dri.
RUN ["/bin/bash", "-o", "pipefail", "-c", "(getent group video >/dev/null || groupadd --system video) \
 && (getent group render >/dev/null || groupadd --system render) \
 && (id -u verl >/dev/null 2>&1 || useradd --create-home --uid 1000 --shell /bin/bash verl) \
 && usermod -aG video,render verl"]
USER 1000
