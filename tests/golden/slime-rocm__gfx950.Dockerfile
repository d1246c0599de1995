# syntax=docker/dockerfile:1.7
# Rendered by rocmstack 0.1.0 from recipe slime-rocm for gfx950. Do not edit: re-render.
# render hash @render-hash@
# Layers run from least to most often changed, so bumping one pin rebuilds only its layer and later.
FROM rocm/sgl-dev:rocm7-vllm-20250904
# Every RUN below runs `bash -o pipefail -c` itself (exec form, written by the renderer): the OCI image format
# has no SHELL.
USER 0
WORKDIR /

# Compile-time jobs: lower it if a source build (vLLM, sgl-kernel) runs out of memory.
ARG MAX_JOBS="128"
# Set, pip byte-compiles into .pyc files checked by hash, not stamped with the install time, so two builds
# of one render give the same layers (compilers read it for __DATE__). A constant: the layer cache holds.
ARG SOURCE_DATE_EPOCH=0
# Every GPU-code build below targets exactly these archs.
ENV PYTORCH_ROCM_ARCH="gfx950" \
    AMDGPU_TARGETS="gfx950" \
    GPU_TARGETS="gfx950" \
    AMDGPU_TARGET="gfx950" \
    GPU_ARCHS="gfx950" \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# --- guards (early): freeze the base's torch stack for every later pip install ---
COPY --chmod=0755 rocmstack/bin/ /opt/rocmstack/bin/
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/guard.py freeze torch==2.9.0 torchvision torchaudio triton"]
ENV PIP_CONSTRAINT=/opt/rocmstack/constraints.txt

# --- system ---

# --- ray: Ray ---
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install \
      \"ray[data,train,tune,serve]==2.47.1\""]

# --- megatron: Megatron-Core and its bridge ---
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install \
      \"numpy>=1.21.0,<2.0\""]

# apex: https://github.com/ROCm/apex.git @ master
RUN ["/bin/bash", "-o", "pipefail", "-c", "git clone -q --depth 1 --branch master https://github.com/ROCm/apex.git /opt/src/apex \
 && git -C /opt/src/apex rev-parse HEAD > /opt/rocmstack/refs.apex"]
WORKDIR /opt/src/apex
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "MAX_JOBS=\"${MAX_JOBS}\" python3 setup.py install"]
WORKDIR /

# megatron-lm: https://github.com/NVIDIA/Megatron-LM @ 48406695c4efcf1026a7ed70bb390793918dd97b
RUN ["/bin/bash", "-o", "pipefail", "-c", "git init -q /opt/src/megatron-lm \
 && git -C /opt/src/megatron-lm remote add origin https://github.com/NVIDIA/Megatron-LM \
 && git -C /opt/src/megatron-lm fetch -q --depth 1 origin 48406695c4efcf1026a7ed70bb390793918dd97b \
 && git -C /opt/src/megatron-lm checkout -q --detach FETCH_HEAD \
 && test \"$(git -C /opt/src/megatron-lm rev-parse HEAD)\" = 48406695c4efcf1026a7ed70bb390793918dd97b"]
COPY --chmod=0644 rocmstack/patches/slime-megatron-fused-kernels.json /opt/rocmstack/patches/slime-megatron-fused-kernels.json
COPY --chmod=0644 rocmstack/patches/slime-megatron.json /opt/rocmstack/patches/slime-megatron.json
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/apply_patches.py --source-root /opt/src/megatron-lm /opt/rocmstack/patches/slime-megatron-fused-kernels.json /opt/rocmstack/patches/slime-megatron.json"]
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/megatron-lm"]

# transformer-engine: https://github.com/ROCm/TransformerEngine.git @ 90c04bcdc3c109505b318f40a39680263af55edf
RUN ["/bin/bash", "-o", "pipefail", "-c", "git init -q /opt/src/transformer-engine \
 && git -C /opt/src/transformer-engine remote add origin https://github.com/ROCm/TransformerEngine.git \
 && git -C /opt/src/transformer-engine fetch -q --depth 1 origin 90c04bcdc3c109505b318f40a39680263af55edf \
 && git -C /opt/src/transformer-engine checkout -q --detach FETCH_HEAD \
 && test \"$(git -C /opt/src/transformer-engine rev-parse HEAD)\" = 90c04bcdc3c109505b318f40a39680263af55edf"]
RUN ["/bin/bash", "-o", "pipefail", "-c", "git -C /opt/src/transformer-engine submodule update -q --init --recursive --depth 1"]
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "CMAKE_PREFIX_PATH=\"/opt/rocm:/opt/rocm/hip:/usr/local:/usr\" \
    NVTE_FRAMEWORK=\"pytorch\" \
    NVTE_ROCM_ARCH=\"gfx950\" \
    NVTE_USE_HIPBLASLT=\"1\" \
    NVTE_USE_ROCM=\"1\" \
    MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/transformer-engine"]

# --- sglang: SGLang and sgl-kernel (re-validate when the base or vLLM moves) ---
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install \
      \"sglang-router>=0.3.0\" \
      \"torchao==0.9.0\""]

# aiter: https://github.com/ROCm/aiter.git @ v0.1.7.post2
RUN ["/bin/bash", "-o", "pipefail", "-c", "git clone -q --depth 1 --branch v0.1.7.post2 https://github.com/ROCm/aiter.git /opt/src/aiter \
 && git -C /opt/src/aiter rev-parse HEAD > /opt/rocmstack/refs.aiter"]
RUN ["/bin/bash", "-o", "pipefail", "-c", "git -C /opt/src/aiter submodule update -q --init --recursive --depth 1"]
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "GPU_ARCHS=\"gfx950\" \
    MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/aiter"]

# sgl-kernel: https://github.com/sgl-project/sglang.git @ v0.5.6
RUN ["/bin/bash", "-o", "pipefail", "-c", "git clone -q --depth 1 --branch v0.5.6 https://github.com/sgl-project/sglang.git /opt/src/sgl-kernel \
 && git -C /opt/src/sgl-kernel rev-parse HEAD > /opt/rocmstack/refs.sgl-kernel"]
WORKDIR /opt/src/sgl-kernel/sgl-kernel
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "MAX_JOBS=\"${MAX_JOBS}\" python3 setup_rocm.py install"]
WORKDIR /

# sglang: https://github.com/sgl-project/sglang.git @ v0.5.6 (0.5.6)
# (same checkout as /opt/src/sgl-kernel)
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/sgl-kernel/python"]
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/guard.py pin sglang==0.5.6"]

# --- app: the RL framework on top ---
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install \
      \"click==8.2.1\" \
      \"pydra-config==0.0.15\" \
      \"tensorboard>=2\" \
      \"torch-memory-saver>=0.0.8\""]

# slime: https://github.com/THUDM/slime @ 624b824a898ab0ec1fcb4d373004c7f3852bf515
RUN ["/bin/bash", "-o", "pipefail", "-c", "git init -q /opt/src/slime \
 && git -C /opt/src/slime remote add origin https://github.com/THUDM/slime \
 && git -C /opt/src/slime fetch -q --depth 1 origin 624b824a898ab0ec1fcb4d373004c7f3852bf515 \
 && git -C /opt/src/slime checkout -q --detach FETCH_HEAD \
 && test \"$(git -C /opt/src/slime rev-parse HEAD)\" = 624b824a898ab0ec1fcb4d373004c7f3852bf515"]
# slime's requirements as the recipe lists them (a lock installs them hash-checked with the layer)
COPY rocmstack/requires/slime.txt /opt/rocmstack/requires/slime.txt
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install -r /opt/rocmstack/requires/slime.txt"]
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/slime"]

# --- env: runtime defaults (last, so changing one rebuilds nothing above) ---
ENV HIP_FORCE_DEV_KERNARG="1" \
    HSA_NO_SCRATCH_RECLAIM="1" \
    NCCL_MIN_NCHANNELS="112" \
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN="1" \
    SGLANG_MOE_PADDING="1" \
    SGLANG_ROCM_FUSED_DECODE_MLA="1" \
    SGLANG_SET_CPU_AFFINITY="1" \
    SGLANG_USE_AITER="1" \
    SGLANG_USE_ROCM700A="1" \
    TORCHINDUCTOR_MAX_AUTOTUNE="1" \
    TORCHINDUCTOR_MAX_AUTOTUNE_POINTWISE="1" \
    VLLM_FP8_ACT_PADDING="1" \
    VLLM_FP8_PADDING="1" \
    VLLM_FP8_REDUCE_CONV="1" \
    VLLM_FP8_WEIGHT_PADDING="1"

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
      dev.rocmstack.gpu-archs="gfx950" \
      dev.rocmstack.patches="slime-megatron-fused-kernels,slime-megatron" \
      dev.rocmstack.pins="base:rocm/sgl-dev:rocm7-vllm-20250904,python:3.12,rocm:7.0,torch:2.9.0,aiter:v0.1.7.post2,apex:master,click:8.2.1,megatron-lm:48406695c4efcf1026a7ed70bb390793918dd97b,numpy:>=1.21.0,<2.0,pydra-config:0.0.15,ray:2.47.1,sgl-kernel:v0.5.6,sglang:v0.5.6,sglang-router:>=0.3.0,slime:624b824a898ab0ec1fcb4d373004c7f3852bf515,tensorboard:>=2,torch-memory-saver:>=0.0.8,torchao:0.9.0,transformer-engine:90c04bcdc3c109505b318f40a39680263af55edf" \
      dev.rocmstack.recipe="slime-rocm" \
      dev.rocmstack.render-hash="@render-hash@" \
      dev.rocmstack.version="0.1.0" \
      org.opencontainers.image.base.name="rocm/sgl-dev:rocm7-vllm-20250904" \
      org.opencontainers.image.description="slime (Megatron-LM + SGLang v0.5.6 rollout, Ray 2.47.1) on ROCm 7 for MI355X (rocm/sgl-dev base)" \
      org.opencontainers.image.title="rocmstack slime-rocm" \
      org.opencontainers.image.vendor="rocmstack"
COPY --chmod=0644 rocmstack/lock.json /opt/rocmstack/lock.json
# The recipe's framework smoke (`rocmstack smoke framework`): validate runs it from here, so an image built
# from a recipe that is not shipped with rocmstack still runs its framework's own loop.
COPY --chmod=0644 rocmstack/framework-smoke.json /opt/rocmstack/framework-smoke.json

# Run as the non-root user rocm (numeric, so runAsNonRoot can verify it), in the groups that own /dev/kfd and /dev/dri.
RUN ["/bin/bash", "-o", "pipefail", "-c", "(getent group video >/dev/null || groupadd --system video) \
 && (getent group render >/dev/null || groupadd --system render) \
 && (id -u rocm >/dev/null 2>&1 || useradd --create-home --uid 1000 --shell /bin/bash rocm) \
 && usermod -aG video,render rocm"]
USER 1000
