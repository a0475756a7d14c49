"""Array kernels of a small deep-learning runtime, on CPU and CUDA.

Every function takes any array gpufilt's importer accepts (numpy, cupy,
torch, jax, numba, plain buffers), runs where the data lives, writes into
``out=`` when given (and returns that very object) and otherwise returns an
array of the caller's own library on the caller's device.
"""
from __future__ import annotations

from ._ops_matmul import matmul

__all__: list[str] = ["matmul"]
