"""Array kernels of a small deep-learning runtime, on CPU and CUDA.

Every function takes any array gpufilt's importer accepts (numpy, cupy,
torch, jax, numba, plain buffers), runs where the data lives, writes into
``out=`` when given (and returns that very object) and otherwise returns an
array of the caller's own library on the caller's device.
"""
from __future__ import annotations

from . import _ops_array, _ops_nn
from ._ops_array import add, broadcast_to, check_errors, fill, gather, multiply, sum  # noqa: A004
from ._ops_matmul import matmul
from ._ops_nn import (log_softmax, relu, relu_grad, sigmoid, sigmoid_grad,
                      softmax, softmax_cross_entropy, softmax_cross_entropy_grad)

__all__: list[str] = [*_ops_array.__all__, "matmul", *_ops_nn.__all__]
