"""Array kernels of a small deep-learning runtime, on CPU and CUDA.

Every function takes any array gpufilt's importer accepts (numpy, cupy,
torch, jax, numba, plain buffers), runs where the data lives, writes into
``out=`` when given (and returns that very object) and otherwise returns an
array of the caller's own library on the caller's device.
"""
from __future__ import annotations

from ._ops_array import add, broadcast_to, fill, gather, multiply, sum  # noqa: A004 - numpy's name
from ._ops_matmul import matmul
from ._ops_nn import (log_softmax, relu, relu_grad, sigmoid, sigmoid_grad, softmax, softmax_cross_entropy,
                      softmax_cross_entropy_grad)
from ._range_errors import check_errors

__all__ = ["fill", "broadcast_to", "sum", "add", "multiply", "gather", "matmul",
           "relu", "relu_grad", "sigmoid", "sigmoid_grad", "softmax", "log_softmax",
           "softmax_cross_entropy", "softmax_cross_entropy_grad", "check_errors"]
