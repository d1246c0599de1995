# syntax=docker/dockerfile:1.7
# Rendered by rocmstack 0.1.0 from recipe verl-0.7.1-rocm7.0.2 for gfx942;gfx950. Do not edit: re-render.
# render hash @render-hash@
# Layers run from least to most often changed, so bumping one pin rebuilds only its layer and later.
FROM rocm/verl:verl-0.7.1.amd0_rocm7.0.2_ubuntu22.04_py3.12_vllm0.20.2@sha256:64072e02ef3fc364a0bef09e71c0f4b3ae32ba6fc65e4d121a4736a538aa2bb8
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
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/guard.py freeze torch==2.9.1 torchvision torchaudio triton"]
RUN ["/bin/bash", "-o", "pipefail", "-c", "python3 /opt/rocmstack/bin/guard.py python 3.12"]
ENV PIP_CONSTRAINT=/opt/rocmstack/constraints.txt

# --- system ---

# --- amdsmi: ROCm SDK fixes and amdsmi: without amdsmi Ray's AMD detector reports 0 GPUs ---

# --- ray: Ray ---

# --- megatron: Megatron-Core and its bridge ---

# --- vllm: vLLM (built from source for the archs above) ---

# --- verl: verl and its Python stack ---

# --- env: runtime defaults (last, so changing one rebuilds nothing above) ---
ENV VLLM_ROCM_USE_AITER="1" \
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
      dev.rocmstack.patches="" \
      dev.rocmstack.pins="base:rocm/verl:verl-0.7.1.amd0_rocm7.0.2_ubuntu22.04_py3.12_vllm0.20.2,python:3.12,rocm:7.0.2,torch:2.9.1,amdsmi:7.0.2,cupy-rocm-7-0:base,megatron-core:0.16.0,ray:2.55.1,verl:0.7.1,vllm:0.20.2rc1.dev253" \
      dev.rocmstack.recipe="verl-0.7.1-rocm7.0.2" \
      dev.rocmstack.render-hash="@render-hash@" \
      dev.rocmstack.version="0.1.0" \
      org.opencontainers.image.base.digest="sha256:64072e02ef3fc364a0bef09e71c0f4b3ae32ba6fc65e4d121a4736a538aa2bb8" \
      org.opencontainers.image.base.name="rocm/verl:verl-0.7.1.amd0_rocm7.0.2_ubuntu22.04_py3.12_vllm0.20.2" \
      org.opencontainers.image.description="verl 0.7.1.amd0 with vLLM 0.20.2 on ROCm 7.0.2 (published image as base)" \
      org.opencontainers.image.title="rocmstack verl-0.7.1-rocm7.0.2" \
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
