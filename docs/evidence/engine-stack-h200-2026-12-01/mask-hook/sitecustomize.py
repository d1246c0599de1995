# Only the bench's engine process gets a mask that names no GPU of this one-GPU node (as a launcher would set).
import os
import sys

if "rocmstack.bench.engine_child" in sys.orig_argv:
    os.environ["CUDA_VISIBLE_DEVICES"] = "1"
