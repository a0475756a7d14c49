"""Neural-network kernels of gpufilt.ops: activations, softmax, cross-entropy.

Every function runs where its arrays live (CPU or one CUDA device, on the
stream ``_dispatch.resolve_stream`` picks), writes into ``out=`` when given
and returns that very object, and otherwise returns a new array of the
caller's library. ``x`` and ``out`` may be the same array (in place).

Dtypes: float16, float32, float64 (and bfloat16 torch tensors). Integer and
bool inputs raise TypeError, as torch's softmax does, rather than being
upcast as numpy would: a deep-learning runtime keeps its dtypes explicit.
16-bit data is computed in float32, float32 in float32, float64 in double.

Labels of ``softmax_cross_entropy`` are integer class indices (any integer
dtype, logits' shape without the class axis) or probabilities (one-hot or
soft, logits' shape and dtype). The class axis is ``axis`` (default -1, the
(N, C) layout; pass ``axis=1`` for torch's (N, C, d1, ...) layout); the loss
is the mean over every other index, as torch's ``reduction='mean'``.

Out-of-range index labels raise IndexError on the CPU. A CUDA kernel cannot
raise without the host waiting for it: the loss becomes NaN (and the
gradient rows of the bad labels NaN) so the error shows in the result, and
the next gpufilt.ops call on CUDA raises IndexError, or check_errors(), which
waits for a stream first (see _range_errors.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import _docs
from ._args import check_axis
from ._dispatch import Operand, allocate_like, dtype_kind, hand_back, is_bfloat16
from ._range_errors import ops_backend

__all__ = ["relu", "relu_grad", "sigmoid", "sigmoid_grad", "softmax", "log_softmax",
           "softmax_cross_entropy", "softmax_cross_entropy_grad"]

# dtype objects, not names: numpy's dtype.name is slow Python code (a
# microsecond a call).
_FLOAT_DTYPES = frozenset(np.dtype(name) for name in ("float16", "float32", "float64"))


# ------------------------------------------------------------------ checks

def _float_operand(x, name, op):
    src = Operand(x, name)
    if src.dtype not in _FLOAT_DTYPES and not is_bfloat16(src.dtype):
        raise TypeError(f"{op}: {name} has dtype {src.dtype}; it takes float16, float32, float64 "
                        "(or bfloat16) arrays; cast integer or bool arrays to a float dtype first")
    return src


def _like(src, other, name, ref, op):
    """`other` (an Operand called `name`) has src's shape and dtype."""
    if other.shape != src.shape:
        raise ValueError(f"{op}: {name} has shape {other.shape} but {ref} has shape {src.shape}")
    if other.dtype != src.dtype:
        raise TypeError(f"{op}: {name} has dtype {other.dtype} but {ref} has dtype {src.dtype}")


def _out(out, src, shape, op):
    """(kernel array, caller's array or None): a new array of `shape` and
    src's dtype by src's library, or `out` checked to match."""
    if out is None:
        return allocate_like(src, src.dtype, shape), None
    dst = Operand(out, "out")
    if dst.shape != tuple(shape):
        raise ValueError(f"{op}: out has shape {dst.shape} but the result has shape {tuple(shape)}")
    if dst.dtype != src.dtype:
        raise TypeError(f"{op}: out has dtype {dst.dtype} but the result has dtype {src.dtype}")
    return dst.obj, out


def _axis(axis, ndim):
    if ndim == 0:  # torch accepts dim 0 and -1 for 0-d tensors
        return check_axis(axis, 1)
    return check_axis(axis, ndim)


def _finish(out, result, src):
    return hand_back(out, src) if result is None else result


# --------------------------------------------------------------- pointwise

def _pointwise(op, x, grad, out, stream, x_name="x"):
    src = _float_operand(x, x_name, op)
    g = None
    if grad is not None:
        g = Operand(grad, "grad")
        _like(src, g, "grad", x_name, op)
    module, stream = ops_backend(src, stream)
    dst, result = _out(out, src, src.shape, op)
    module.nn_pointwise(op, src.obj, None if g is None else g.obj, dst, stream)
    return _finish(dst, result, src)


@_docs.numpy_sections(
    [("x : array", "Floating-point data."), "out", "stream"],
    ("result : array", "max(x, 0), of x's library on x's device; out itself when given."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> ops.relu(np.array([-1.0, 0.0, 2.5]))
    array([0. , 0. , 2.5])
    """)
def relu(x: Any, out: Any = None, *, stream: Any = None) -> Any:
    """max(x, 0) elementwise (NaN stays NaN, as torch.relu)."""
    return _pointwise("relu", x, None, out, stream)


@_docs.numpy_sections(
    [("x : array", "relu's input."), ("grad : array", "The gradient of the loss with respect to relu's output."),
     "out", "stream"],
    ("result : array", "The gradient with respect to x; out itself when given."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> ops.relu_grad(np.array([-1.0, 0.0, 2.5]), np.array([1.0, 1.0, 1.0]))
    array([0., 0., 1.])
    """)
def relu_grad(x: Any, grad: Any, out: Any = None, *, stream: Any = None) -> Any:
    """Gradient of relu: ``grad`` where ``x > 0``, else 0 (torch's threshold_backward)."""
    return _pointwise("relu_grad", x, grad, out, stream)


@_docs.numpy_sections(
    [("x : array", "Floating-point data."), "out", "stream"],
    ("result : array", "1 / (1 + exp(-x)), of x's library on x's device; out itself when given."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> ops.sigmoid(np.array([-1.0, 0.0, 2.0])).round(6)
    array([0.268941, 0.5     , 0.880797])
    """)
def sigmoid(x: Any, out: Any = None, *, stream: Any = None) -> Any:
    """1 / (1 + exp(-x)) elementwise, without overflow for large |x|."""
    return _pointwise("sigmoid", x, None, out, stream)


@_docs.numpy_sections(
    [("y : array", "sigmoid's output."), ("grad : array", "The gradient of the loss with respect to y."), "out",
     "stream"],
    ("result : array", "The gradient with respect to sigmoid's input; out itself when given."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> y = ops.sigmoid(np.array([0.0, 2.0]))
    >>> ops.sigmoid_grad(y, np.ones(2)).round(6)
    array([0.25    , 0.104994])
    """)
def sigmoid_grad(y: Any, grad: Any, out: Any = None, *, stream: Any = None) -> Any:
    """Gradient of sigmoid from its output ``y``: ``grad * (1 - y) * y``
    (torch's sigmoid_backward)."""
    return _pointwise("sigmoid_grad", y, grad, out, stream, x_name="y")


# ----------------------------------------------------------------- softmax

def _softmax(x, axis, out, stream, log):
    op = "log_softmax" if log else "softmax"
    src = _float_operand(x, "x", op)
    axis = _axis(axis, src.ndim)
    module, stream = ops_backend(src, stream)
    dst, result = _out(out, src, src.shape, op)
    module.softmax(src.obj, dst, axis, log, stream)
    return _finish(dst, result, src)


@_docs.numpy_sections(
    [("x : array", "Floating-point data."), ("axis : int, optional", "The axis normalised; default -1."), "out",
     "stream"],
    ("result : array", "The softmax, of x's library on x's device; out itself when given."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> ops.softmax(np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])).round(6)
    array([[0.090031, 0.244728, 0.665241],
           [0.333333, 0.333333, 0.333333]])
    """)
def softmax(x: Any, axis: int = -1, out: Any = None, *, stream: Any = None) -> Any:
    """exp(x) / sum(exp(x)) along ``axis``, stable for any magnitude
    (online max and rescaled sum, then one write pass)."""
    return _softmax(x, axis, out, stream, log=False)


@_docs.numpy_sections(
    [("x : array", "Floating-point data."), ("axis : int, optional", "The axis normalised; default -1."), "out",
     "stream"],
    ("result : array", "The log of the softmax; out itself when given."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> ops.log_softmax(np.array([1.0, 2.0, 3.0])).round(6)
    array([-2.407606, -1.407606, -0.407606])
    """)
def log_softmax(x: Any, axis: int = -1, out: Any = None, *, stream: Any = None) -> Any:
    """(x - max) - log(sum(exp(x - max))) along ``axis``."""
    return _softmax(x, axis, out, stream, log=True)


# ----------------------------------------------------------- cross-entropy

def _cross_entropy_args(logits, labels, axis, op):
    """(logits Operand, labels Operand, class axis) after checking labels."""
    src = _float_operand(logits, "logits", op)
    if src.ndim == 0:
        raise ValueError(f"{op}: logits must have a class axis; got a 0-d array")
    axis = check_axis(axis, src.ndim)
    lab = Operand(labels, "labels")
    if lab.dtype.kind in "iu":
        expected = src.shape[:axis] + src.shape[axis + 1:]
        if lab.shape != expected:
            raise ValueError(f"{op}: index labels must have logits' shape without the class axis "
                             f"{axis}, {expected}; got labels of shape {lab.shape} for logits of "
                             f"shape {src.shape}")
    elif dtype_kind(lab.dtype) == "f":
        if lab.shape != src.shape:
            raise ValueError(f"{op}: probability labels must have logits' shape {src.shape}; "
                             f"got labels of shape {lab.shape}")
        if lab.dtype != src.dtype:
            raise TypeError(f"{op}: probability labels have dtype {lab.dtype} but logits have "
                            f"dtype {src.dtype}; they must match")
    else:
        raise TypeError(f"{op}: labels have dtype {lab.dtype}; pass integer class indices or "
                        "float probabilities")
    if src.shape[axis] == 0:
        raise ValueError(f"{op}: logits have no classes (axis {axis} has length 0)")
    return src, lab, axis


@_docs.numpy_sections(
    [("logits : array", "Floating-point scores, classes along axis."),
     ("labels : array", "Class indices (integers, logits' shape without axis) or probabilities (logits' shape)."),
     ("axis : int, optional", "The class axis; default -1."), "out", "stream"],
    ("loss : array", "The mean loss, 0-d, of logits' library on its device; out itself when given."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> logits = np.array([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]])
    >>> loss = ops.softmax_cross_entropy(logits, np.array([0, 1]))
    >>> loss.shape, round(float(loss), 6)
    ((), 0.31854)
    """)
def softmax_cross_entropy(logits: Any, labels: Any, axis: int = -1, out: Any = None, *,
                          stream: Any = None) -> Any:
    """Mean cross-entropy loss of softmax(logits) against ``labels``, a 0-d
    array of logits' dtype and library (``out=``: a 0-d array).

    ``labels``: integer class indices (logits' shape without ``axis``) or
    probabilities (logits' shape and dtype). One pass over each row (online
    max and sum), stable for logits of any magnitude. Out-of-range indices:
    IndexError on the CPU; on CUDA a NaN loss, and IndexError at the next gpufilt.ops call.
    """
    op = "softmax_cross_entropy"
    src, lab, axis = _cross_entropy_args(logits, labels, axis, op)
    module, stream = ops_backend(src, stream)
    dst, result = _out(out, src, (), op)
    module.softmax_cross_entropy(src.obj, lab.obj, axis, dst, stream)
    return _finish(dst, result, src)


@_docs.numpy_sections(
    [("logits : array", "Floating-point scores, classes along axis."),
     ("labels : array", "Class indices or probabilities, as for softmax_cross_entropy."),
     ("grad : array, optional", "The gradient of the loss (0-d); default 1."), "out",
     ("axis : int, optional", "The class axis; default -1."), "stream"],
    ("result : array", "The gradient with respect to logits; out itself when given."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> logits = np.array([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]])
    >>> ops.softmax_cross_entropy_grad(logits, np.array([0, 1])).round(6)
    array([[-0.170499,  0.121216,  0.049283],
           [ 0.054302, -0.09876 ,  0.044459]])
    """)
def softmax_cross_entropy_grad(logits: Any, labels: Any, grad: Any = None, out: Any = None, *, axis: int = -1,
                               stream: Any = None) -> Any:
    """Gradient of ``softmax_cross_entropy`` with respect to logits:
    ``(softmax(logits) - onehot(labels)) * grad / rows``, rows the number of
    loss terms (N for (N, C) logits).

    ``grad`` is the upstream gradient of the loss: None (1), a number, or a
    0-d float array on logits' device (read by the kernel; the host never
    waits for it). Fused: one pass for each row's max and sum, one writing
    the gradient; the softmax is never stored.
    """
    op = "softmax_cross_entropy_grad"
    src, lab, axis = _cross_entropy_args(logits, labels, axis, op)
    scale = grad
    if grad is not None and not isinstance(grad, (int, float)):
        g = Operand(grad, "grad")
        if g.shape != ():
            raise ValueError(f"{op}: grad must be a number or a 0-d array; got shape {g.shape}")
        if dtype_kind(g.dtype) != "f":
            raise TypeError(f"{op}: grad has dtype {g.dtype}; a float dtype is needed")
        scale = g.obj
    module, stream = ops_backend(src, stream)
    dst, result = _out(out, src, src.shape, op)
    module.softmax_cross_entropy_grad(src.obj, lab.obj, axis, scale, dst, stream)
    return _finish(dst, result, src)
