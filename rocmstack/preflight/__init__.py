"""Preflight of a lab's own job: its real command line, shrunk to one step on a 2-layer model of the same
architecture, run by the framework's own launcher on the node (or in the image) before the real job.

recipe-free by design: what runs is the lab's command, with only what makes it small and self-contained
rewritten (model, data, steps, loggers, checkpoints); parallelism, engine, dtype, quantization and the job's
environment stay as the lab gives them. Layers: shrink (the model) -> adapters (the command lines) ->
runner, which reads the run's log with gpu.engine_log (what the engine selected, what failed).
"""
