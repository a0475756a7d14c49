"""scipy.ndimage's Fourier-domain filters, on the output of numpy or cupy FFTs.

Each filter multiplies the transform by a factor that is a product (or, for
the ellipsoid and the shift, a function of a sum) of one small table per
axis, indexed by the frequency of each element along that axis. The tables
are computed in float64 on the host (a few values per axis, moved to the
GPU for cupy arrays: parameters, not data). The products run in float64 as
scipy's C code computes them, converted once to the output's dtype: in one
pass of the C++ core (numpy) or a CUDA kernel (cupy) for float and complex
data, in the input's library for other dtypes.
"""
from __future__ import annotations

import functools
import importlib
import math
from typing import Any

import numpy as np

from . import _args, _core, _dispatch, _docs
from ._errors import ArgumentError

_REAL_OUTPUTS = (np.float32, np.float64, np.complex64, np.complex128)

# The parameters every Fourier filter takes after its own.
_COMMON_PARAMETERS = [
    ("n : int, optional", "The length of the real transform along `axis` (numpy.fft.rfft's n); -1 "
     "(default): a complex transform along every axis."),
    ("axis : int, optional", "The axis of the real transform. Default -1."),
    ("output : array or dtype, optional", "Where the result goes: an array of the input's shape (written and "
     'returned) or a dtype of float32, float64, complex64 or complex128 (fourier_shift: complex only). '
     'Default: '
     "the input's dtype for float32, complex64 and complex128 input, else float64 (fourier_shift: complex128)."),
    ("stream : int, cupy.cuda.Stream or torch.cuda.Stream, optional", "For cupy data, the CUDA stream the work "
     "is queued on; default cupy's current stream."),
]


def _namespace(input):
    """(array, library module) for numpy or cupy data."""
    src = _dispatch.Operand(input, "input") if not isinstance(input, np.ndarray) else None
    library = "numpy" if src is None or src.library in ("numpy", "buffer") else src.library
    if library not in ("numpy", "cupy"):
        raise TypeError(f"the Fourier filters take numpy or cupy arrays (the output of their FFTs), not {library}")
    xp = importlib.import_module(library)
    return xp.asarray(input), xp


def _output(output, x, xp, complex_only):
    """scipy's output rules for the Fourier filters: (dtype, caller's array or None)."""
    allowed = (np.complex64, np.complex128) if complex_only else _REAL_OUTPUTS
    if output is None:
        keep = (np.complex64, np.complex128) if complex_only else (np.complex64, np.complex128, np.float32)
        return (x.dtype if x.dtype.type in keep else np.dtype(np.complex128 if complex_only else np.float64)), None
    if isinstance(output, (type, np.dtype, str)):
        dtype = np.dtype(output)
        if dtype.type not in allowed:
            raise ArgumentError(f"output type not supported: {dtype}")
        if x.dtype.kind == "c" and dtype.kind != "c":  # scipy's RuntimeError, before anything is computed
            raise ArgumentError(f"data type not supported: output {dtype} for input {x.dtype}")
        return dtype, None
    if tuple(output.shape) != tuple(x.shape):
        raise ArgumentError("output shape not correct")
    if output.dtype.type not in allowed or (x.dtype.kind == "c" and output.dtype.kind != "c"):
        raise ArgumentError(f"data type not supported: output {output.dtype} for input {x.dtype}")
    _dispatch.check_writable_output(output)  # the importer's rule: writable, no element overlapping another
    return output.dtype, output


def _frequencies(length, axis, n, real_axis):
    """The frequency index k of each element along an axis: 0, 1, ...,
    then the negative ones (a complex FFT), or 0 .. length - 1 along the
    axis of a real FFT (n >= 0)."""
    k = np.arange(length, dtype=np.float64)
    if axis == real_axis and n >= 0:
        return k
    return np.where(k < (length + 1) // 2, k, k - length)


def _period(length, axis, n, real_axis):
    """The transform length an axis's frequencies divide by, as a numpy
    float: n=0 divides by zero as scipy's C code does (inf, then NaN where
    it meets frequency 0), not with Python's ZeroDivisionError."""
    return np.float64(n if axis == real_axis and n >= 0 else length)


def _whole(x, grid):
    """(shape, starts) of the whole transform: x itself (grid None), or the
    transform x is one block of (grid, from gpufilt.dask: the whole shape and
    where x starts in it). The tables follow the whole transform's shape."""
    return (x.shape, (0,) * x.ndim) if grid is None else grid


def _quiet_tables(filter_work):
    """A filter's work with numpy's floating-point warnings off, as scipy's
    C code computes its tables (n=0 divides by zero into inf and NaN)."""
    @functools.wraps(filter_work)
    def quiet(*args, **kwargs):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return filter_work(*args, **kwargs)
    return quiet


def _own(table, ax, x, starts):
    """The entries of an axis's table that belong to x's elements."""
    return table[starts[ax]:starts[ax] + x.shape[ax]]


def _check(input, parameter, name, n, axis):
    x, xp = _namespace(input)
    if x.dtype.kind not in "biufc":
        raise TypeError(f"input has dtype {x.dtype}; the Fourier filters take numbers")
    values = _args.normalize_sequence(parameter, x.ndim, name)
    values = [float(_args._scalar(v)) for v in values]
    real_axis = _args.check_axis(axis, x.ndim)  # (0-d input: no axis, scipy's AxisError)
    n = int(n)
    return x, xp, values, real_axis, n


def _apply(x, xp, factor, output, out_dtype, caller_output):
    """x times the float64 `factor` (scipy's order: the factor, then the
    element; in float64, complex128 for complex data), into the output."""
    wide = np.complex128 if x.dtype.kind == "c" else np.float64
    values = (x.view(np.uint8) if x.dtype == np.bool_ else x).astype(wide)
    product = factor * values
    result = product.astype(out_dtype)
    if caller_output is None:
        return result
    caller_output[...] = result
    return caller_output


_CORE_DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


def _in_one_pass(x, xp, out_dtype, caller_output, tables, factor):
    """x times the factor of per-axis `tables` in one pass (core/fourier.hpp:
    factor "product" of their entries, "phase" exp(i * their sum), or
    "ellipsoid" of the sum of 2 or 3 axes' squares): by the C++ core for
    numpy data, by the CUDA kernel for cupy data, of the float dtypes. None
    where it does not apply (other dtypes, an output that overlaps the input
    other than element for element), and the caller computes it."""
    if x.dtype.type not in _CORE_DTYPES or not x.dtype.isnative or (factor == "ellipsoid" and x.ndim not in (2, 3)):
        return None
    if xp is np and not x.flags.aligned:
        return None
    if xp is not np and x.ndim == 0:
        return None
    target = caller_output
    if target is not None and not _writable_apart_or_in_place(x, target, xp):
        return None
    if target is None:
        target = xp.empty(x.shape, out_dtype)
    if xp is np:
        tables = [None if t is None else np.ascontiguousarray(t, dtype=np.float64) for t in tables]
        _core._fourier_multiply(x, target, tables, factor)
        return target
    starts = np.cumsum([0] + [0 if t is None else t.size for t in tables])[:-1]
    table_at = [-1 if t is None else int(at) for t, at in zip(tables, starts)]
    entries = [t for t in tables if t is not None]
    # One copy of the parameters to the device (cupy stages it through pinned memory: the host does not wait).
    device_tables = xp.asarray(np.concatenate(entries) if entries else np.zeros(1), dtype=np.float64)
    _dispatch.cuda_module()._fourier_multiply(x, target, device_tables, table_at, factor,
                                              xp.cuda.get_current_stream().ptr)
    return target


def _writable_apart_or_in_place(x, target, xp):
    """Whether the one-pass kernels can write `target` for `x`: an array of
    x's library, of a native dtype, sharing no memory with x or being x's
    elements exactly."""
    if not isinstance(target, xp.ndarray) or not target.dtype.isnative:
        return False
    # An unaligned numpy output takes numpy's path; the CUDA pass refuses a cupy array not aligned to its
    # item size (ValueError), which cupy's own kernels cannot read either.
    if xp is np and not target.flags.aligned:
        return False
    if not xp.may_share_memory(x, target):
        return True
    return _data_pointer(target, xp) == _data_pointer(x, xp) and target.strides == x.strides


def _data_pointer(a, xp):
    return a.__array_interface__["data"][0] if xp is np else a.data.ptr


def _apply_tables(x, xp, tables, output, out_dtype, caller_output):
    """_apply with the product of per-axis tables as the factor: in one pass
    (_in_one_pass) for the float dtypes, else by the input's library."""
    done = _in_one_pass(x, xp, out_dtype, caller_output, tables, "product")
    return done if done is not None else _apply(x, xp, _outer(tables, xp), output, out_dtype, caller_output)


def _outer(tables, xp):
    """The product of per-axis tables over the whole grid, multiplied in
    axis order (as scipy's loop multiplies them), by the input's library:
    only the tables travel to the GPU, never a grid."""
    factor = None
    for ax, table in enumerate(tables):
        if table is None:
            continue
        shape = [1] * len(tables)
        shape[ax] = table.size
        t = xp.asarray(table.reshape(shape))
        factor = t if factor is None else factor * t
    return xp.ones(()) if factor is None else factor


@_docs.numpy_sections(
    [("input : array_like", "The transform (numpy or cupy; a cupy array runs on its GPU)."),
     ("sigma : float or sequence of floats", "Standard deviation of the Gaussian, per axis."),
     *_COMMON_PARAMETERS],
    ("result : array", "The filtered transform, of the input's library on its device; `output` itself "
     "when it is an array."), """
    >>> import numpy as np
    >>> from gpufilt import ndimage
    >>> x = np.fft.fft(np.array([0.0, 0.0, 4.0, 0.0, 0.0, 0.0]))
    >>> np.fft.ifft(ndimage.fourier_gaussian(x, 1.0)).real.round(4)
    array([0.2118, 0.9728, 1.5908, 0.9728, 0.2118, 0.04  ])
    """)
def fourier_gaussian(
        input: Any, sigma: Any, n: int = -1, axis: int = -1, output: Any = None, *,
        stream: Any = None) -> Any:
    """Multidimensional Gaussian Fourier filter (scipy.ndimage.fourier_gaussian)."""
    with _dispatch.stream_current_for(input, stream):  # where the tables are copied and the products run
        return _gaussian(input, sigma, n, axis, output)


@_quiet_tables
def _gaussian(input, sigma, n, axis, output, grid=None):
    x, xp, sigmas, real_axis, n = _check(input, sigma, "sigma", n, axis)
    out_dtype, caller_output = _output(output, x, xp, complex_only=False)
    shape, starts = _whole(x, grid)
    tables = []
    for ax, (length, s) in enumerate(zip(shape, sigmas)):
        if length <= 1:
            tables.append(None)
            continue
        scale = s * math.pi / _period(length, ax, n, real_axis)
        exponent = -2.0 * scale * scale * _frequencies(length, ax, n, real_axis) ** 2
        tables.append(_own(np.where(np.abs(exponent) > 50.0, 0.0, np.exp(exponent)), ax, x, starts))
    return _apply_tables(x, xp, tables, output, out_dtype, caller_output)


@_docs.numpy_sections(
    [("input : array_like", "The transform (numpy or cupy; a cupy array runs on its GPU)."),
     ("size : float or sequence of floats", "Length of the box, per axis."),
     *_COMMON_PARAMETERS],
    ("result : array", "The filtered transform, of the input's library on its device; `output` itself "
     "when it is an array."), """
    >>> import numpy as np
    >>> from gpufilt import ndimage
    >>> x = np.fft.fft(np.array([0.0, 0.0, 4.0, 0.0, 0.0, 0.0]))
    >>> np.fft.ifft(ndimage.fourier_uniform(x, 3)).real.round(4)
    array([ 0.1008,  1.2326,  1.374 ,  1.2326,  0.1008, -0.0407])
    """)
def fourier_uniform(
        input: Any, size: Any, n: int = -1, axis: int = -1, output: Any = None, *,
        stream: Any = None) -> Any:
    """Multidimensional uniform Fourier filter (scipy.ndimage.fourier_uniform)."""
    with _dispatch.stream_current_for(input, stream):
        return _uniform(input, size, n, axis, output)


@_quiet_tables
def _uniform(input, size, n, axis, output, grid=None):
    x, xp, sizes, real_axis, n = _check(input, size, "size", n, axis)
    out_dtype, caller_output = _output(output, x, xp, complex_only=False)
    shape, starts = _whole(x, grid)
    tables = []
    for ax, (length, s) in enumerate(zip(shape, sizes)):
        if length <= 1:
            tables.append(None)
            continue
        step = math.pi * s / _period(length, ax, n, real_axis)
        k = _frequencies(length, ax, n, real_axis)
        with np.errstate(invalid="ignore", divide="ignore"):
            table = np.sin(step * k) / (step * k) if step > 0.0 else np.zeros(length)
        table[0] = 1.0
        tables.append(_own(table, ax, x, starts))
    return _apply_tables(x, xp, tables, output, out_dtype, caller_output)


def _cupy_bessel_j1(r):
    """The Bessel function J1 of float64 cupy values (cupyx.scipy.special's)."""
    return importlib.import_module("cupyx.scipy.special").j1(r)


@_docs.numpy_sections(
    [("input : array_like", "The transform (numpy or cupy; a cupy array runs on its GPU)."),
     ("size : float or sequence of floats", "Length of the ellipsoid's axes, per axis."),
     *_COMMON_PARAMETERS],
    ("result : array", "The filtered transform, of the input's library on its device; `output` itself "
     "when it is an array."), """
    >>> import numpy as np
    >>> from gpufilt import ndimage
    >>> x = np.fft.fft(np.array([0.0, 0.0, 4.0, 0.0, 0.0, 0.0]))
    >>> np.fft.ifft(ndimage.fourier_ellipsoid(x, 3)).real.round(4)
    array([ 0.1008,  1.2326,  1.374 ,  1.2326,  0.1008, -0.0407])
    """)
def fourier_ellipsoid(
        input: Any, size: Any, n: int = -1, axis: int = -1, output: Any = None, *,
        stream: Any = None) -> Any:
    """Multidimensional ellipsoid Fourier filter, for 1-, 2- and 3-D data
    (scipy.ndimage.fourier_ellipsoid)."""
    with _dispatch.stream_current_for(input, stream):
        return _ellipsoid(input, size, n, axis, output)


@_quiet_tables
def _ellipsoid(input, size, n, axis, output, grid=None):
    x, xp, sizes, real_axis, n = _check(input, size, "size", n, axis)
    if x.ndim > 3:
        raise NotImplementedError("Only 1d, 2d and 3d inputs are supported")
    out_dtype, caller_output = _output(output, x, xp, complex_only=False)
    if x.size == 0:
        return _apply(x, xp, xp.ones(()), output, out_dtype, caller_output)
    shape, starts = _whole(x, grid)
    tables = []
    for ax, (length, s) in enumerate(zip(shape, sizes)):
        step = math.pi * s / _period(length, ax, n, real_axis)
        tables.append(_own(_frequencies(length, ax, n, real_axis) * step, ax, x, starts))
    if x.ndim == 1:
        t = tables[0]
        with np.errstate(invalid="ignore", divide="ignore"):
            factor = np.where(t != 0, np.sin(t) / np.where(t != 0, t, 1.0), 1.0)  # one axis: a table
        return _apply_tables(x, xp, [factor], output, out_dtype, caller_output)
    squares = [t * t for t in tables]
    done = _in_one_pass(x, xp, out_dtype, caller_output, squares, "ellipsoid")
    if done is not None:
        return done
    return _apply(x, xp, _ellipsoid_factor(squares, x, xp), output, out_dtype, caller_output)


def _ellipsoid_factor(squares, x, xp):
    """The ellipsoid's float64 factor over the whole grid of 2-D or 3-D
    data (for the dtypes the one pass does not take): the C++ core's for
    numpy data (the factor times ones), cupy's functions for cupy data."""
    if xp is np:
        grid = np.ones(x.shape)
        _core._fourier_multiply(grid, grid, [np.ascontiguousarray(sq, dtype=np.float64) for sq in squares],
                                "ellipsoid")
        return grid
    total = None
    for ax, sq in enumerate(squares):
        shape = [1] * x.ndim
        shape[ax] = sq.size
        sq = xp.asarray(sq.reshape(shape))
        total = sq if total is None else total + sq
    r = xp.sqrt(total)
    safe = xp.where(r > 0.0, r, 1.0)
    if x.ndim == 2:
        return xp.where(r > 0.0, 2.0 * _cupy_bessel_j1(safe) / safe, 1.0)
    return xp.where(r > 0.0, 3.0 * (xp.sin(safe) - safe * xp.cos(safe)) / (safe * safe * safe), 1.0)


@_docs.numpy_sections(
    [("input : array_like", "The transform (numpy or cupy; a cupy array runs on its GPU)."),
     ("shift : float or sequence of floats", "The shift, per axis, in elements."),
     *_COMMON_PARAMETERS],
    ("result : array", "The filtered transform, of the input's library on its device; `output` itself "
     "when it is an array."), """
    >>> import numpy as np
    >>> from gpufilt import ndimage
    >>> x = np.fft.fft(np.array([0.0, 0.0, 4.0, 0.0, 0.0, 0.0]))
    >>> np.fft.ifft(ndimage.fourier_shift(x, 1)).real.round(4) + 0.0
    array([0., 0., 0., 4., 0., 0.])
    """)
def fourier_shift(
        input: Any, shift: Any, n: int = -1, axis: int = -1, output: Any = None, *,
        stream: Any = None) -> Any:
    """Multidimensional Fourier shift filter (scipy.ndimage.fourier_shift):
    a complex result."""
    with _dispatch.stream_current_for(input, stream):
        return _shift(input, shift, n, axis, output)


@_quiet_tables
def _shift(input, shift, n, axis, output, grid=None):
    x, xp, shifts, real_axis, n = _check(input, shift, "shift", n, axis)
    out_dtype, caller_output = _output(output, x, xp, complex_only=True)
    whole, starts = _whole(x, grid)
    tables = [None if length <= 1 else
              _own(-2.0 * math.pi * s / _period(length, ax, n, real_axis) * _frequencies(length, ax, n, real_axis),
                   ax, x, starts)
              for ax, (length, s) in enumerate(zip(whole, shifts))]
    done = _in_one_pass(x, xp, out_dtype, caller_output, tables, "phase")
    if done is not None:
        return done
    phase = None
    for ax, table in enumerate(tables):
        if table is None:
            continue
        shape = [1] * x.ndim
        shape[ax] = x.shape[ax]
        table = xp.asarray(table.reshape(shape))
        phase = table if phase is None else phase + table
    phase = xp.zeros(()) if phase is None else phase
    rotation = xp.cos(phase) + 1j * xp.sin(phase)
    values = (x.view(np.uint8) if x.dtype == np.bool_ else x).astype(np.complex128 if x.dtype.kind == "c"
                                                                      else np.float64)
    result = (values * rotation).astype(out_dtype)
    if caller_output is None:
        return result
    caller_output[...] = result
    return caller_output


# Each filter's work by name, with `grid` for one block of a larger
# transform (gpufilt.dask runs them block by block).
BLOCKWISE = {"fourier_gaussian": _gaussian, "fourier_uniform": _uniform, "fourier_ellipsoid": _ellipsoid,
             "fourier_shift": _shift}
