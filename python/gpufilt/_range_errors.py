"""Out-of-range indices met on the GPU (gather's indices, cross-entropy's
labels), and where gpufilt.ops calls run.

A CUDA kernel cannot raise, and reading anything it wrote would make the host
wait, which no gpufilt call may do (it would also break CUDA graph capture).
So the kernel never reads through a bad index, writes a defined value instead
(zeros for gather, NaN for the cross-entropy's loss and gradient rows), and
records the first bad index in one process-wide record in mapped host memory
(src/cuda/range_error.cuh), read without synchronising. The next gpufilt.ops
call on CUDA raises it as IndexError; ``check_errors()`` waits for one stream
and raises at once. On the CPU the same errors raise before anything is
written.
"""
from __future__ import annotations

from typing import Any

from . import _dispatch, _docs
from ._dispatch import Operand


def ops_backend(src: Operand, stream):
    """(kernel module, stream int) for a gpufilt.ops call on src's device;
    on CUDA it first raises what an earlier kernel recorded."""
    module, stream = _dispatch._backend(src, stream)
    if src.device == "cuda":
        raise_recorded(module)
    return module, stream


def raise_recorded(module):
    """IndexError for the out-of-range index a finished kernel recorded (the
    record is then cleared); nothing when there is none. Never waits."""
    record = module.take_range_error()
    if record is None:
        return
    kind, value, bound = record
    if kind == "index":
        raise IndexError(f"an earlier gpufilt.ops.gather on the GPU met index {value}, out of bounds for an "
                         f"axis of size {bound}; the elements it indexed were written as zeros")
    raise IndexError(f"an earlier gpufilt.ops softmax_cross_entropy on the GPU met label {value}, out of range "
                     f"for {bound} classes (0 <= label < {bound}); its loss and gradient rows were written as NaN")


@_docs.numpy_sections(
    [("x : array, optional", "An array whose library's current stream is waited for."), "stream"],
    ("None", "Raises IndexError where an index was out of range."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> ops.check_errors(np.zeros(3))
    """)
def check_errors(x: Any = None, *, stream: Any = None) -> None:
    """Raises IndexError now if a GPU gather or cross-entropy met an
    out-of-range index.

    Waits for ``stream`` (default: the current stream of ``x``'s library, or
    the legacy default stream) and nothing else, then reads the record the
    kernels keep. A no-op without CUDA."""
    module = _dispatch._cuda
    if module is None or module.unusable_reason():
        return
    if x is not None:
        stream = _dispatch.resolve_stream(stream, Operand(x, "x"))
    elif stream is not None:
        stream = _dispatch.resolve_stream(stream, None)
    module.synchronize_stream(stream or 0)
    raise_recorded(module)
