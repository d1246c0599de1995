"""The GPU machinery that bench, smoke and doctor share: the reference rollout engine and its Triton
kernels, weight transfer between a trainer and a rollout process, and the reading of an engine's log.

It imports nothing from bench, smoke or doctor; they import from here.
"""
