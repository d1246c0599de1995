#!/usr/bin/env bash
# A lab's launcher that pins its engine to one GPU with CUDA_VISIBLE_DEVICES alone (never HIP_VISIBLE_DEVICES),
# the way a launcher written for NVIDIA does: right on NVIDIA, one mask of two on AMD.
export CUDA_VISIBLE_DEVICES=${PIN_GPU:-0}
exec "$@"
