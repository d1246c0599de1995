"""The GPU machinery that bench, smoke and doctor share: the reference rollout engine and its Triton
kernels, and weight transfer between a trainer and a rollout process.

It imports nothing from bench, smoke or doctor; they import from here.
"""
