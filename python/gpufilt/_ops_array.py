"""Array operations of gpufilt.ops: fill, broadcast_to, sum, add, multiply,
gather; numpy's names, signatures and result dtypes, on CPU and CUDA arrays.

An out-of-range index in a GPU gather raises IndexError at the next
gpufilt.ops call, or in ``gpufilt.ops.check_errors()`` (see
_range_errors.py).
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from . import _dispatch, _docs
from ._dispatch import BFLOAT16, Operand, dtype_kind, hand_back, is_bfloat16
from ._range_errors import ops_backend

__all__ = ["fill", "broadcast_to", "sum", "add", "multiply", "gather"]

_AxisError = getattr(getattr(np, "exceptions", np), "AxisError", ValueError)


# ------------------------------------------------------------------ helpers

def _same_device(named):
    """ValueError unless every (name, Operand) is on the first one's device."""
    first_name, first = named[0]
    for name, other in named[1:]:
        if (other.device, other.device_id) != (first.device, first.device_id):
            raise ValueError(f"{first_name} is on {_where(first)} but {name} is on {_where(other)}; "
                             "all arrays of one call must be on one device")


def _where(op):
    return "the CPU" if op.device == "cpu" else f"cuda:{op.device_id}"


def _operand(obj, name):
    op = Operand(obj, name)
    if dtype_kind(op.dtype) == "c":
        raise TypeError(f"{name} has dtype {op.dtype}; gpufilt.ops takes bool, integer and float dtypes")
    return op


def _check_out(out: Operand, shape, dtype, what):
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"out has shape {tuple(out.shape)}; {what} has shape {tuple(shape)}")
    if out.dtype != dtype:
        raise TypeError(f"out has dtype {out.dtype}; {what} has dtype {dtype}")


def _scalar_bytes(value, dtype):
    """(bytes, dtype name) of `value` converted to `dtype` by numpy (its range
    checks included); bfloat16 without numpy support goes as float32."""
    if isinstance(value, (complex, np.complexfloating)):
        raise TypeError(f"value {value!r} is complex; gpufilt.ops takes real values")
    if isinstance(dtype, _dispatch.NamedDType):
        return np.asarray(value, np.float32).tobytes(), "float32"
    return np.asarray(value, dtype).tobytes(), dtype.name


# -------------------------------------------------------------- fill/broadcast

@_docs.numpy_sections(
    [("x : array", "The array to fill, on the CPU or a CUDA device."),
     ("value : scalar", "Converted to x's dtype as numpy converts it (out of range: OverflowError)."), "stream"],
    ("x : array", "x itself."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> x = np.zeros((2, 3), dtype=np.float32)
    >>> ops.fill(x, 1.5)
    array([[1.5, 1.5, 1.5],
           [1.5, 1.5, 1.5]], dtype=float32)
    """)
def fill(x: Any, value: Any, *, stream: Any = None) -> Any:
    """Sets every element of ``x`` to ``value`` in place (``x.fill(value)``:
    numpy's conversion and range checks); returns ``x``."""
    src = _operand(x, "x")
    module, stream = ops_backend(src, stream)
    data, name = _scalar_bytes(value, src.dtype)
    module.fill(src.obj, data, name, stream)
    return x


@_docs.numpy_sections(
    [("x : array", "The array broadcast."), ("out : array", "The target, of x's dtype and device."), "stream"],
    ("out : array", "out itself."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> out = np.empty((2, 3))
    >>> ops.broadcast_to(np.array([1.0, 2.0, 3.0]), out)
    array([[1., 2., 3.],
           [1., 2., 3.]])
    """)
def broadcast_to(x: Any, out: Any, *, stream: Any = None) -> Any:
    """Writes ``x`` broadcast to ``out``'s shape (numpy's rules, by zero
    strides: nothing is materialised) into ``out``; returns ``out``. The
    dtypes must be equal."""
    src, dst = _operand(x, "x"), _operand(out, "out")
    _same_device([("x", src), ("out", dst)])
    if dst.dtype != src.dtype:
        raise TypeError(f"out has dtype {dst.dtype}; x has dtype {src.dtype}: they must be equal")
    module, stream = ops_backend(src, stream)
    module.broadcast_to(src.obj, dst.obj, stream)
    return out


# ----------------------------------------------------------------------- sum

def _normalize_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (numbers.Integral, np.integer)) else tuple(axis)
    result = []
    for a in axes:
        if not isinstance(a, (numbers.Integral, np.integer)) or isinstance(a, bool):
            raise TypeError(f"axis must be None, an int or a tuple of ints, not {axis!r}")
        a = int(a)
        if not -ndim <= a < ndim:
            raise _AxisError(f"axis {a} is out of bounds for array of dimension {ndim}")
        result.append(a % ndim)
    if len(set(result)) != len(result):
        raise ValueError("duplicate value in 'axis'")
    return tuple(result)


def _sum_dtype(dtype):
    """numpy.sum's default result dtype: small integers and bool widen."""
    if is_bfloat16(dtype):
        return dtype
    if dtype.kind == "b" or (dtype.kind == "i" and dtype.itemsize < 8):
        return np.dtype(np.int_)
    if dtype.kind == "u" and dtype.itemsize < 8:
        return np.dtype(np.uint)
    return dtype


def _requested_dtype(dtype):
    if dtype is None:
        return None
    if is_bfloat16(dtype) or str(dtype).rsplit(".", 1)[-1] == "bfloat16":
        return BFLOAT16
    try:
        result = _dispatch._numpy_dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"dtype {dtype!r} is not a dtype") from exc
    if dtype_kind(result) not in "biuf":
        raise TypeError(f"dtype {result} is not supported; gpufilt.ops takes bool, integer and float dtypes")
    return result


def _same_kind(src, dst):
    if not is_bfloat16(src) and not is_bfloat16(dst):
        return np.can_cast(src, dst, "same_kind")
    order = "biuf"
    return dtype_kind(dst) == "f" or order.index(dtype_kind(src)) <= order.index(dtype_kind(dst)) < 3


@_docs.numpy_sections(
    [("x : array", "The array summed."), ("axis : None, int or tuple of ints, optional", "The axes summed; default all."),
     ("dtype : dtype, optional", "The result's dtype; default numpy's."), "out",
     ("keepdims : bool, optional", "Keep the summed axes with length 1."), "stream"],
    ("result : array", "The sums (0-d for a full sum), of x's library on x's device; out itself when given."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> x = np.arange(6, dtype=np.int8).reshape(2, 3)
    >>> ops.sum(x)
    array(15)
    >>> ops.sum(x, axis=1, keepdims=True)
    array([[ 3],
           [12]])
    """)
def sum(x: Any, axis: int | tuple[int, ...] | None = None, dtype: Any = None, out: Any = None,
        keepdims: bool = False, *, stream: Any = None) -> Any:  # noqa: A001 - numpy's name
    """numpy.sum: ``x`` summed over ``axis`` (None: all; an int or a tuple).

    Result dtype as numpy: bool and small integers widen to int64/uint64;
    floats keep theirs (float16 and bfloat16 are summed in double and
    rounded once). Floats are summed in double with pairwise or compensated
    steps, so float32 sums of 2**24 elements and more match a float64 sum to
    about 1e-7; integers wrap as numpy's do. ``out`` is written in place and
    returned; its dtype, when given without ``dtype``, is the sum's dtype.
    """
    src = _operand(x, "x")
    axes = _normalize_axes(axis, src.ndim)
    shape = tuple(1 if d in axes else n for d, n in enumerate(src.shape) if keepdims or d not in axes)
    wanted = _requested_dtype(dtype)
    default = wanted if wanted is not None else _sum_dtype(src.dtype)
    module, stream = ops_backend(src, stream)
    if out is None:
        result = _dispatch.allocate_like(src, default, shape)
        module.sum(src.obj, list(axes), result, stream)
        return hand_back(result, src)
    dst = _operand(out, "out")
    _same_device([("x", src), ("out", dst)])
    if tuple(dst.shape) != shape:
        raise ValueError(f"out has shape {tuple(dst.shape)}; the sum has shape {shape}")
    if not _same_kind(default, dst.dtype):
        raise TypeError(f"out has dtype {dst.dtype}, which the sum's dtype {default} cannot be cast to "
                        "(numpy's same_kind rule)")
    module.sum(src.obj, list(axes), dst.obj, stream)
    return out


# ---------------------------------------------------------- add and multiply

_BF16_WITH = {"b": None, "i1": None, "u1": None, "i2": "float32", "u2": "float32", "f2": "float32",
              "i4": "float64", "u4": "float64", "i8": "float64", "u8": "float64", "f4": "float32",
              "f8": "float64"}


def result_type(a, b):
    """numpy's result dtype of two arrays' dtypes; bfloat16 promotes as
    numpy's float16 does, and bfloat16 with float16 gives float32 (torch's
    and ml_dtypes' rule)."""
    if not is_bfloat16(a) and not is_bfloat16(b):
        return np.result_type(a, b)
    other = b if is_bfloat16(a) else a
    if is_bfloat16(other):
        return BFLOAT16
    wider = _BF16_WITH[other.kind + str(other.itemsize) if other.kind != "b" else "b"]
    return BFLOAT16 if wider is None else np.dtype(wider)


def _scalar_result_type(dtype, value):
    """NEP 50: a Python scalar takes the array's dtype unless its kind is
    higher (int with bool, float with bool or int)."""
    if isinstance(value, (complex, np.complexfloating)):
        raise TypeError(f"scalar {value!r} is complex; gpufilt.ops takes real values")
    if isinstance(value, np.generic):  # numpy scalars are typed, not weak
        return result_type(dtype, value.dtype)
    if not is_bfloat16(dtype):
        return np.result_type(dtype, value)
    return BFLOAT16


def _binary(op, a, b, out, stream):
    x = _operand(a, "a")
    if _is_python_or_numpy_scalar(b):
        return _binary_scalar(op, x, b, out, stream)
    y = _operand(b, "b")
    _same_device([("a", x), ("b", y)])
    try:
        shape = np.broadcast_shapes(tuple(x.shape), tuple(y.shape))
    except ValueError:
        raise ValueError(f"a of shape {tuple(x.shape)} and b of shape {tuple(y.shape)} do not broadcast "
                         "together") from None
    dtype = result_type(x.dtype, y.dtype)
    module, stream = ops_backend(x, stream)
    target = _output(out, x, shape, dtype, op)
    module.binary(op, x.obj, y.obj, _kernel_array(target), stream)
    return out if out is not None else hand_back(target, x)


def _kernel_array(target):
    """The object handed to the kernel: a checked out's importable object."""
    return target.obj if isinstance(target, Operand) else target


def _output(out, src: Operand, shape, dtype, op):
    """A checked `out` (as an Operand) or a new array of src's library."""
    if out is None:
        return _dispatch.allocate_like(src, dtype, shape)
    dst = _operand(out, "out")
    _same_device([("input", src), ("out", dst)])
    _check_out(dst, shape, dtype, f"{op} of these operands")
    return dst


def _binary_scalar(op, x: Operand, value, out, stream):
    dtype = _scalar_result_type(x.dtype, value)
    module, stream = ops_backend(x, stream)
    data, name = _scalar_bytes(value, dtype)
    target = _output(out, x, tuple(x.shape), dtype, op)
    module.binary_scalar(op, x.obj, data, name, _kernel_array(target), stream)
    return out if out is not None else hand_back(target, x)


def _is_python_or_numpy_scalar(v):
    return isinstance(v, (bool, int, float, complex, np.generic))


@_docs.numpy_sections(
    [("a, b : array or scalar", "The operands, broadcast against each other; at least one an array."), "out", "stream"],
    ("result : array", "a + b, of the array's library on its device; out itself when given."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> ops.add(np.arange(3), np.array([[10], [20]]))
    array([[10, 11, 12],
           [20, 21, 22]])
    >>> ops.add(np.arange(3, dtype=np.uint8), 255)
    array([255,   0,   1], dtype=uint8)
    """)
def add(a: Any, b: Any, out: Any = None, *, stream: Any = None) -> Any:
    """numpy.add of two arrays (broadcast) or an array and a scalar; result
    dtype by numpy's rules (NEP 50 for Python scalars); integers wrap."""
    if _is_python_or_numpy_scalar(a) and not _is_python_or_numpy_scalar(b):
        a, b = b, a  # addition commutes: the array goes first
    return _binary("add", a, b, out, stream)


@_docs.numpy_sections(
    [("a, b : array or scalar", "The operands, broadcast against each other; at least one an array."), "out", "stream"],
    ("result : array", "a * b, of the array's library on its device; out itself when given."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> ops.multiply(np.arange(4.0), 0.5)
    array([0. , 0.5, 1. , 1.5])
    """)
def multiply(a: Any, b: Any, out: Any = None, *, stream: Any = None) -> Any:
    """numpy.multiply, as :func:`add`."""
    if _is_python_or_numpy_scalar(a) and not _is_python_or_numpy_scalar(b):
        a, b = b, a
    return _binary("multiply", a, b, out, stream)


# -------------------------------------------------------------------- gather

@_docs.numpy_sections(
    [("source : array", "The array taken from."), ("index : array of int", "The indices along axis, on source's device."),
     ("axis : int, optional", "The axis indexed; default 0."), "out", "stream"],
    ("result : array", "numpy.take(source, index, axis), of source's library on its device; out itself when given."), """
    >>> import numpy as np
    >>> from gpufilt import ops
    >>> ops.gather(np.array([[1, 2], [3, 4], [5, 6]]), np.array([2, 0, -1]))
    array([[5, 6],
           [1, 2],
           [5, 6]])
    """)
def gather(source: Any, index: Any, axis: int = 0, out: Any = None, *, stream: Any = None) -> Any:
    """numpy.take(source, index, axis): the result has shape
    ``source.shape[:axis] + index.shape + source.shape[axis+1:]``.

    ``index`` is an integer array on source's device; negative entries count
    from the end. An out-of-range index raises IndexError: on the CPU before
    anything is written; on the GPU at the next gpufilt.ops call or at
    :func:`check_errors` (see the module's note), with zeros written where
    the index was out of range.
    """
    src = _operand(source, "source")
    if isinstance(index, (list, tuple, int, np.integer)) and src.device == "cpu":
        index = np.asarray(index)
    idx = _operand(index, "index")
    _same_device([("source", src), ("index", idx)])
    if dtype_kind(idx.dtype) not in "iu":
        raise TypeError(f"index has dtype {idx.dtype}; it must be an integer array")
    if not isinstance(axis, (numbers.Integral, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"axis must be an int, not {axis!r}")
    if not -src.ndim <= axis < src.ndim:
        raise _AxisError(f"axis {axis} is out of bounds for array of dimension {src.ndim}")
    axis = int(axis) % src.ndim
    shape = tuple(src.shape[:axis]) + tuple(idx.shape) + tuple(src.shape[axis + 1:])
    module, stream = ops_backend(src, stream)
    target = _output(out, src, shape, src.dtype, "take")
    module.gather(src.obj, idx.obj, axis, _kernel_array(target), stream)
    return out if out is not None else hand_back(target, src)
