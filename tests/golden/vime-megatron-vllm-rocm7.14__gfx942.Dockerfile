# syntax=docker/dockerfile:1.7
# Rendered by rocmstack 0.1.0 from recipe vime-megatron-vllm-rocm7.14 for gfx942. Do not edit: re-render.
# render hash @render-hash@
# Layers run from least to most often changed, so bumping one pin rebuilds only its layer and later.
FROM rocm/primus:v26.4
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
ENV PYTORCH_ROCM_ARCH="gfx942" \
    AMDGPU_TARGETS="gfx942" \
    GPU_TARGETS="gfx942" \
    AMDGPU_TARGET="gfx942" \
    GPU_ARCHS="gfx942" \
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

# --- megatron: Megatron-Core and its bridge ---

# megatron-lm: https://github.com/NVIDIA/Megatron-LM @ 1dcf0dafa884ad52ffb243625717a3471643e087
RUN ["/bin/bash", "-o", "pipefail", "-c", "git init -q /opt/src/megatron-lm \
 && git -C /opt/src/megatron-lm remote add origin https://github.com/NVIDIA/Megatron-LM \
 && git -C /opt/src/megatron-lm fetch -q --depth 1 origin 1dcf0dafa884ad52ffb243625717a3471643e087 \
 && git -C /opt/src/megatron-lm checkout -q --detach FETCH_HEAD \
 && test \"$(git -C /opt/src/megatron-lm rev-parse HEAD)\" = 1dcf0dafa884ad52ffb243625717a3471643e087"]
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/megatron-lm"]

# --- vllm: vLLM (built from source for the archs above) ---

# vllm: https://github.com/vllm-project/vllm @ 98dff2a81d747d1dba01a47f939f48c3526d4206 (0.29.0)
RUN ["/bin/bash", "-o", "pipefail", "-c", "git init -q /opt/src/vllm \
 && git -C /opt/src/vllm remote add origin https://github.com/vllm-project/vllm \
 && git -C /opt/src/vllm fetch -q --depth 1 origin 98dff2a81d747d1dba01a47f939f48c3526d4206 \
 && git -C /opt/src/vllm checkout -q --detach FETCH_HEAD \
 && test \"$(git -C /opt/src/vllm rev-parse HEAD)\" = 98dff2a81d747d1dba01a47f939f48c3526d4206"]
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install -r /opt/src/vllm/requirements/rocm.txt"]
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "SETUPTOOLS_SCM_PRETEND_VERSION=\"0.29.0\" \
    VLLM_TARGET_DEVICE=\"rocm\" \
    MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/vllm"]
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/guard.py pin vllm==0.29.0"]

# --- app: the RL framework on top ---
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install \
      \"numpy==1.26.4\""]
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install --no-deps \
      \"flash-linear-attention==0.4.2\""]

# torch-memory-saver: https://github.com/fzyzcjy/torch_memory_saver.git @ d64a639
RUN ["/bin/bash", "-o", "pipefail", "-c", "git clone -q https://github.com/fzyzcjy/torch_memory_saver.git /opt/src/torch-memory-saver \
 && git -C /opt/src/torch-memory-saver checkout -q --detach d64a639 \
 && git -C /opt/src/torch-memory-saver rev-parse HEAD > /opt/rocmstack/refs.torch-memory-saver"]
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/torch-memory-saver"]

# vime: https://github.com/vllm-project/vime @ main
RUN ["/bin/bash", "-o", "pipefail", "-c", "git clone -q --depth 1 --branch main https://github.com/vllm-project/vime /opt/src/vime \
 && git -C /opt/src/vime rev-parse HEAD > /opt/rocmstack/refs.vime"]
RUN --mount=type=cache,target=/root/.cache/pip \
    ["/bin/bash", "-o", "pipefail", "-c", "python3 -m pip install -r /opt/src/vime/requirements.txt"]
RUN --mount=type=cache,target=/root/.cache/pip --mount=type=cache,target=/root/.ccache \
    ["/bin/bash", "-o", "pipefail", "-c", "MAX_JOBS=\"${MAX_JOBS}\" python3 -m pip install --no-deps --no-build-isolation /opt/src/vime"]

# --- env: runtime defaults (last, so changing one rebuilds nothing above) ---
ENV CUDA_DEVICE_MAX_CONNECTIONS="1" \
    HSA_ENABLE_IPC_MODE_LEGACY="1" \
    RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES="1" \
    RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES="1" \
    VLLM_USE_MEGA_AOT_ARTIFACT="0"

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
      dev.rocmstack.gpu-archs="gfx942" \
      dev.rocmstack.patches="rtld-local,amdsmi-install" \
      dev.rocmstack.pins="base:rocm/primus:v26.4,python:3.12,rocm:7.14,torch:2.12.0,amdsmi:sdk,flash-linear-attention:0.4.2,megatron-lm:1dcf0dafa884ad52ffb243625717a3471643e087,numpy:1.26.4,rocm-sdk:7.14,torch-memory-saver:d64a639,vime:main,vllm:98dff2a81d747d1dba01a47f939f48c3526d4206" \
      dev.rocmstack.recipe="vime-megatron-vllm-rocm7.14" \
      dev.rocmstack.render-hash="@render-hash@" \
      dev.rocmstack.version="0.1.0" \
      org.opencontainers.image.base.name="rocm/primus:v26.4" \
      org.opencontainers.image.description="vime (Megatron-LM + vLLM 0.29.0 rollout) on ROCm 7.14 (Primus v26.4)" \
      org.opencontainers.image.title="rocmstack vime-megatron-vllm-rocm7.14" \
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
