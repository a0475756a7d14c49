"""scipy.ndimage's filters, drop-in, on CPU and CUDA arrays.

Signatures and results follow scipy.ndimage (SciPy 1.17); inputs may be any
array gpufilt can import (numpy, cupy, torch, jax, numba, plain buffers) and
results come back in the caller's library, on the input's device. GPU calls
also take ``stream=`` (an int, or a cupy/torch stream); CPU calls take
``threads=`` (the threads of that call, default GPUFILT_NUM_THREADS, else
OMP_NUM_THREADS, else all cores).
"""
from __future__ import annotations

import functools
import math
import numbers
from typing import Any, Callable, Sequence

import numpy as np

from . import _args, _core, _dispatch, _docs
from ._errors import ArgumentError
from ._dispatch import Operand, _is_dtype_like, is_bfloat16, run_footprint, run_separable

__all__ = [
    "correlate1d", "convolve1d", "correlate", "convolve",
    "gaussian_filter1d", "gaussian_filter", "uniform_filter1d", "uniform_filter",
    "minimum_filter1d", "maximum_filter1d", "minimum_filter", "maximum_filter",
    "median_filter", "rank_filter", "percentile_filter",
    "sobel", "prewitt", "laplace", "gaussian_laplace", "gaussian_gradient_magnitude",
    "generic_laplace", "generic_gradient_magnitude",
    "grey_erosion", "grey_dilation", "grey_opening", "grey_closing", "morphological_gradient",
    "morphological_laplace", "white_tophat", "black_tophat",
    "binary_erosion", "binary_dilation", "binary_opening", "binary_closing", "binary_propagation",
    "binary_fill_holes", "generate_binary_structure", "iterate_structure",
    "fourier_gaussian", "fourier_uniform", "fourier_ellipsoid", "fourier_shift",
    "generic_filter", "generic_filter1d", "vectorized_filter",
]


# What the filters take: any array gpufilt imports (DLPack, CUDA Array
# Interface, buffer protocol) or numpy converts; an output array or dtype.
ArrayLike = Any
Output = Any

# scipy.ndimage's public functions (SciPy 1.17) that gpufilt does not
# provide: asking for one says so, rather than a bare AttributeError (there
# is no silent fallback to scipy).
_NOT_PROVIDED = frozenset("""
    affine_transform binary_hit_or_miss center_of_mass distance_transform_bf distance_transform_cdt
    distance_transform_edt extrema find_objects
    geometric_transform histogram label
    labeled_comprehension map_coordinates maximum maximum_position mean median minimum minimum_position
    rotate shift spline_filter spline_filter1d standard_deviation sum sum_labels value_indices variance
    watershed_ift zoom""".split())


def __getattr__(name):
    if name in _NOT_PROVIDED:
        raise AttributeError(f"gpufilt.ndimage does not provide scipy.ndimage.{name}; gpufilt provides "
                             f"the filters {', '.join(__all__)} (use scipy.ndimage.{name} on numpy "
                             f"arrays, or cupyx.scipy.ndimage.{name} on cupy arrays)")
    raise AttributeError(f"module 'gpufilt.ndimage' has no attribute {name!r}")


# ------------------------------------------------------------------ helpers

def _refuse_bfloat16(dtype, name):
    if is_bfloat16(dtype):
        raise TypeError(f"{name} has dtype bfloat16, which scipy.ndimage filters do not take; "
                        "cast to float32 first (gpufilt.ops takes bfloat16)")


class _FilterInput(Operand):
    """The input of a filter: an Operand; what scipy takes on the host and
    is not a native array converted with numpy; bfloat16 refused with a
    clear error."""

    __slots__ = ()

    def _import(self, obj, name):
        super()._import(_host_array(obj, name), name)

    def _accept_dtype(self, name):
        if not isinstance(self.dtype, np.dtype) or self.dtype.kind == "V":  # bfloat16 is one of these
            _refuse_bfloat16(self.dtype, name)


_filter_input = _FilterInput


def _host_array(obj, name):
    """`obj` where gpufilt's importer reads it; else, for what scipy takes
    and the importer cannot (lists, tuples, scalars, objects with __array__
    such as pandas', arrays of non-native byte order), the numpy array that
    scipy would make of it: converted once, explicitly, as scipy does (the
    input was never a native array, so no array is copied behind the
    caller's back)."""
    if isinstance(obj, np.ndarray):
        return obj if obj.dtype.isnative else obj.astype(obj.dtype.newbyteorder("="))
    if _dispatch.importable(obj):
        return obj
    try:
        array = np.asarray(obj)
    except Exception as exc:  # numpy's own refusal (ragged lists, ...)
        raise TypeError(f"{name} of type {type(obj).__name__} is not an array gpufilt can read "
                        f"and numpy cannot convert it: {exc}") from None
    if array.dtype.kind not in "biufc":
        raise TypeError(f"{name} of type {type(obj).__name__} converts to a numpy array of dtype "
                        f"{array.dtype}; gpufilt filters bool, integer, float and complex data")
    return _host_array(array, name)


def output_dtype_of(output):
    """_dispatch.output_dtype_of, refusing bfloat16 outputs."""
    dtype = _dispatch.output_dtype_of(output)
    _refuse_bfloat16(dtype, "output")
    return dtype


def _check_complex_output(output, out_dtype, complex_output):
    """scipy's RuntimeError for an output array (of dtype `out_dtype`) of a
    real dtype where the result is complex (a dtype request is promoted
    instead, with a warning)."""
    if complex_output and output is not None and not _is_dtype_like(output) \
            and _dispatch.dtype_kind(out_dtype) != "c":
        raise ArgumentError(f"output must have complex dtype: the result is complex, output is {out_dtype}")


def _run(kernel, src, work, output, cval, complex_output, stream):
    """Runs `kernel` (run_separable or run_footprint) with scipy's output
    rules: dtype requests, complex promotion, cval checks."""
    _args.check_cval(cval, src.dtype)
    default = _args.result_dtype(None, src.dtype, complex_output)
    wanted = default
    if output is not None:
        wanted = output_dtype_of(output)  # refuses bfloat16 outputs before any work
        _check_complex_output(output, wanted, complex_output)
        if _dispatch.is_swapped_numpy(output):
            return _into_swapped(output, src, lambda native: _run(kernel, src, work, native, cval,
                                                                  complex_output, stream))
        if _is_dtype_like(output):
            output = wanted = _args.result_dtype(wanted, src.dtype, complex_output)
    if wanted == np.bool_ and _dispatch.has_uint8_views(src):
        return _into_bool(kernel, src, work, output, cval, stream)
    return kernel(src, output, work, cval, default, stream)


def _into_swapped(output, src, run):
    """scipy's writes into a numpy output of non-native byte order: `run`
    into a native array of its dtype, then assigned to it by numpy, which
    swaps the bytes (the kernels read and write native order only)."""
    _dispatch.check_output_shape(output, src)
    output[...] = run(output.dtype.newbyteorder("="))
    return output


def _into_bool(kernel, src, work, output, cval, stream):
    """scipy's bool outputs: each value converted to a byte as C converts a
    double to an unsigned char (as into uint8: -1 -> 255, 2.7 -> 2) and
    stored as the bool's byte, so intermediates keep their values and the
    result is True where that byte is not 0. The kernels write the output
    through a uint8 view of its memory."""
    out, result = _dispatch.resolve_output(output, src, np.bool_)
    kernel(src, _dispatch.uint8_view(out, src), work, cval, np.uint8, stream)
    return _dispatch.hand_back(out, src) if result is None else result


def _filter(core_kernel, kernel, src, work, output, cval, complex_output=False, stream=None):
    """Runs `work` (1-D passes for run_separable, a footprint for
    run_footprint) with scipy's output rules. The most common calls, a numpy
    or cupy input into a new array of its dtype or into an array of its own
    type and shape, with a float cval, go straight to `core_kernel` (the
    _core binding) or its namesake in _cuda: tiny arrays pay for every step.
    The binding checks the output's device and writability."""
    if stream is None and type(cval) is float and not complex_output:
        if output is None and src.dtype.kind != "b":  # (bool results: _into_bool)
            if type(src.obj) is np.ndarray:  # the binding makes the output (_dispatch.numpy_empty's way)
                return core_kernel(src.obj, None, work, cval, 0.0, 0)
            if _dispatch.on_current_cupy_device(src):
                return _dispatch.new_cupy_result(core_kernel.__name__, src, work, cval, src.dtype)
        elif _is_plain_output(output, src):
            if src.library == "numpy":
                return core_kernel(src.obj, output, work, cval, 0.0, 0)
            if _dispatch.on_current_cupy_device(src):
                return _dispatch.into_cupy_output(core_kernel.__name__, src, output, work, cval)
    return _run(kernel, src, work, output, cval, complex_output, stream)


def _plain_binding(input, output, cval, stream):
    """The binding for the commonest calls, which _filter would send straight
    to it: an exact numpy array (_core) or cupy array on cupy's current device
    (_dispatch.CupyBinding) of a real dtype into a new array of its dtype, a
    float cval, no stream; else None. Filters whose work is memoised test it
    first and call ``binding.separable(input, None, work, cval, 0.0, 0)``
    (or footprint) themselves, skipping the Operand and _filter: tiny arrays
    pay for every step (uniform_filter on 16 floats: 1.20 -> 0.93 us on a
    2-core Zen 5)."""
    if output is not None or stream is not None or type(cval) is not float:
        return None
    if type(input) is np.ndarray:
        return _core if input.dtype.kind in "iuf" and input.dtype.isnative else None
    return _dispatch.CupyBinding if _dispatch.plain_cupy(input) else None


def _is_plain_output(output, src):
    """True for an output _filter's fast path takes: a numpy or cupy array of
    the input's very type and shape, of a real dtype (not bfloat16, kind "V";
    not bool: _into_bool)."""
    return (type(output) is type(src.obj) and src.library in ("numpy", "cupy") and output.dtype.kind in "iuf"
            and output.dtype.isnative
            and output.shape == src.shape)


def _on_cpu_threads(threads, func, *args, **kwargs):
    """func(*args, **kwargs) with its CPU kernels on `threads` threads: a
    filter's `threads=`, for this call and this Python thread only (CUDA
    calls ignore it)."""
    before = _core._set_call_threads(_args.check_threads(threads))
    try:
        return func(*args, **kwargs)
    finally:
        _core._set_call_threads(before)


# _separable(src, passes, output, cval, complex_output=False, stream=None):
# 1-D passes (axis, kind, weights, size, origin, mode).
_separable = functools.partial(_filter, _core.separable, run_separable)
# _footprint_filter(src, spec, output, cval, complex_output=False, stream=None):
# a footprint filter (reduce, ndim, ntaps, offsets, weights, rank, mode).
_footprint_filter = functools.partial(_filter, _core.footprint, run_footprint)
# The binding function of each, for the calls that skip _filter (_plain_binding).
_BINDING_NAME = {run_separable: "separable", run_footprint: "footprint"}


def _correlate_pass(axis, weights, origin, mode):
    return (axis, "correlate", tuple(weights), 1, origin, _args.mode_code(mode))


def _as_weights(weights, ndim=None):
    """Weights as a float64 or complex128 array (1-D unless ndim is None)."""
    w = np.asarray(_dispatch.on_host(weights, "weights"))
    if w.dtype.kind not in "biufc":
        raise TypeError(f"weights must be numbers, got dtype {w.dtype}")
    w = w.astype(np.complex128 if w.dtype.kind == "c" else np.float64, copy=False)
    if ndim == 1 and (w.ndim != 1 or w.shape[0] < 1):  # scipy: RuntimeError('no filter weights given')
        raise ArgumentError(f"no filter weights given: weights must be a non-empty 1-D sequence, got shape "
                            f"{w.shape}")
    return w


def _complex_components(x):
    """Real and imaginary parts of a complex array, as views of it."""
    return x.real, x.imag


def _complex_weights_filter(func, src, weights, output, cval, **kwargs):
    """func with complex weights as real filters of the components, as scipy
    does (_complex_via_real_components); `output` is written last, so an
    output sharing memory with the input gets the result through a temporary."""
    out_dtype = output_dtype_of(output)
    _check_complex_output(output, out_dtype, True)
    if _dispatch.is_swapped_numpy(output):
        return _into_swapped(output, src, lambda native: _complex_weights_filter(func, src, weights, native, cval,
                                                                                **kwargs))
    dtype = _args.result_dtype(out_dtype, src.dtype, complex_output=True)
    if output is None or _is_dtype_like(output):
        out, result = _dispatch.allocate_like(src, dtype), None
    else:
        out, result = _dispatch.resolve_output(output, src, dtype)
    target = out
    if result is not None and _dispatch.may_share_memory(src.obj, out):
        target = _dispatch.allocate_like(src, dtype)
    w_re, w_im = weights.real.copy(), weights.imag.copy()
    t_re, t_im = _complex_components(target)
    cval = complex(cval)
    if src.dtype.kind == "c":
        x_re, x_im = _complex_components(src.obj)
        func(x_re, w_re, output=t_re, cval=cval.real, **kwargs)
        _dispatch.elementwise("subtract", t_re, func(x_im, w_im, output=None, cval=cval.imag, **kwargs),
                              t_re, src)
        func(x_re, w_im, output=t_im, cval=cval.real, **kwargs)
        _dispatch.elementwise("add", t_im, func(x_im, w_re, output=None, cval=cval.imag, **kwargs),
                              t_im, src)
    else:
        _args.check_cval(cval if cval.imag else cval.real, src.dtype)
        func(src.obj, w_re, output=t_re, cval=cval.real, **kwargs)
        func(src.obj, w_im, output=t_im, cval=cval.real, **kwargs)
    if target is not out:
        _dispatch.copy_into(target, out, src)
    return _dispatch.hand_back(out, src) if result is None else result


def gaussian_kernel1d(sigma: float, order: int, radius: int) -> np.ndarray:
    """Taps of a Gaussian (or its `order`-th derivative) at -radius..radius,
    normalised as scipy.ndimage does. Convolution order: reverse to correlate."""
    x = np.arange(-radius, radius + 1)
    if sigma == 0:  # the limit of a vanishing Gaussian: identity, derivatives vanish
        return (x == 0).astype(np.float64) if order == 0 else np.zeros(len(x))
    sigma2 = sigma * sigma
    phi = np.exp(-0.5 / sigma2 * x ** 2)
    phi /= phi.sum()
    if order == 0:
        return phi
    # d/dx (q(x) phi(x)) = (q'(x) - x q(x) / sigma^2) phi(x): iterate on q's
    # coefficients with scipy's very operations (a derivative matrix and a
    # matrix product), so that the taps, and derivatives that cancel to small
    # values, are scipy's to the last bit.
    powers = np.arange(order + 1)
    q = np.zeros(order + 1)
    q[0] = 1
    derivative = np.diag(powers[1:], 1) + np.diag(np.ones(order) / -sigma2, -1)
    for _ in range(order):
        q = derivative.dot(q)
    return (x[:, None] ** powers).dot(q) * phi


@_args.memoize_plain
def _gaussian_pass(axis, sigma, order, mode, truncate, radius):
    sigma = _args.check_sigma(sigma)
    order = _args.check_order(order)
    if radius is None:
        radius = int(float(truncate) * sigma + 0.5)
    if not isinstance(radius, (int, np.integer)) or radius < 0:
        raise ValueError(f"radius must be a non-negative integer, got {radius!r}")
    weights = gaussian_kernel1d(sigma, order, int(radius))[::-1]
    return _correlate_pass(axis, weights.tolist(), 0, mode)


# ------------------------------------------------------------------ filters

@_docs.filter_doc(
    'Calculate a 1-D correlation along the given axis.',
    'Each output element is the sum of the weights times the input elements under them, the window '
    'centred on the element (scipy.ndimage.correlate1d). Complex weights or data are filtered as scipy '
    'does, component by component.',
    ['input', 'weights1d', 'axis', 'output', 'mode', 'cval', 'origin', 'stream', 'threads'],
    """
    >>> ndimage.correlate1d([2, 8, 0, 4, 1, 9, 9, 0], weights=[1, 3])
    array([ 8, 26,  8, 12,  7, 28, 36,  9])
    """)
def correlate1d(input: ArrayLike, weights: ArrayLike, axis: int = -1, output: Output = None,
                mode: str = "reflect", cval: float = 0.0, origin: int = 0, *, stream: Any = None,
                threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, correlate1d, input, weights, axis, output, mode, cval, origin,
                               stream=stream)
    src = _filter_input(input)
    w = _as_weights(weights, ndim=1)
    axis = _args.check_axis(axis, src.ndim)
    origin = _args.check_origin(origin, len(w))
    if w.dtype.kind == "c":  # as np.correlate: conjugate the weights
        return _complex_weights_filter(correlate1d, src, w.conj(), output, cval, axis=axis,
                                       mode=mode, origin=origin, stream=stream)
    passes = [_correlate_pass(axis, w.tolist(), origin, mode)]
    return _separable(src, passes, output, cval, src.dtype.kind == "c", stream)


@_docs.filter_doc(
    'Calculate a 1-D convolution along the given axis.',
    'A correlation with the weights reversed (scipy.ndimage.convolve1d).',
    ['input', 'weights1d', 'axis', 'output', 'mode', 'cval', 'origin', 'stream', 'threads'],
    """
    >>> ndimage.convolve1d([2, 8, 0, 4, 1, 9, 9, 0], weights=[1, 3])
    array([14, 24,  4, 13, 12, 36, 27,  0])
    """)
def convolve1d(input: ArrayLike, weights: ArrayLike, axis: int = -1, output: Output = None,
               mode: str = "reflect", cval: float = 0.0, origin: int = 0, *, stream: Any = None,
               threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, convolve1d, input, weights, axis, output, mode, cval, origin,
                               stream=stream)
    w = _as_weights(weights, ndim=1)
    origin = -_args.check_origin(origin, len(w)) - (1 - len(w) % 2)
    # Reversed taps; conjugated so that correlate1d's conjugation cancels out.
    return correlate1d(input, w[::-1].conj(), axis, output, mode, cval, origin, stream=stream)


@_docs.filter_doc(
    '1-D Gaussian filter.',
    'Correlates the input with a sampled Gaussian (or its derivative) along one axis '
    '(scipy.ndimage.gaussian_filter1d).',
    ['input', 'sigma1d', 'axis', 'order1d', 'output', 'mode', 'cval', 'truncate', 'radius', 'stream', 'threads'],
    """
    >>> ndimage.gaussian_filter1d([1.0, 2.0, 3.0, 4.0, 5.0], 1)
    array([1.42704095, 2.06782203, 3.        , 3.93217797, 4.57295905])
    >>> ndimage.gaussian_filter1d([1.0, 2.0, 3.0, 4.0, 5.0], 1, order=1)
    array([0.36378461, 0.84884706, 0.9701249 , 0.84884706, 0.36378461])
    """)
def gaussian_filter1d(input: ArrayLike, sigma: float, axis: int = -1, order: int = 0, output: Output = None,
                      mode: str = "reflect", cval: float = 0.0, truncate: float = 4.0, *,
                      radius: int | Sequence[int] | None = None, stream: Any = None,
                      threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, gaussian_filter1d, input, sigma, axis, order, output, mode, cval,
                               truncate, radius=radius, stream=stream)
    if (binding := _plain_binding(input, output, cval, stream)) is not None:
        passes = [_gaussian_pass(_args.check_axis(axis, input.ndim), sigma, order, mode, truncate, radius)]
        return binding.separable(input, None, passes, cval, 0.0, 0)
    src = _filter_input(input)
    axis = _args.check_axis(axis, src.ndim)
    passes = [_gaussian_pass(axis, sigma, order, mode, truncate, radius)]
    return _separable(src, passes, output, cval, src.dtype.kind == "c", stream)


@_docs.filter_doc(
    'Multidimensional Gaussian filter.',
    'A sequence of 1-D Gaussian filters, one per axis (scipy.ndimage.gaussian_filter). Intermediate '
    "results are stored in the output's dtype, as scipy stores them. On the GPU the passes of up to three"
    ' axes run fused in one kernel where their lengths allow.',
    ['input', 'sigma', 'order', 'output', 'modes', 'cval', 'truncate', 'radius', 'axes', 'stream', 'threads'],
    """
    >>> a = np.arange(25.0).reshape(5, 5)
    >>> ndimage.gaussian_filter(a, sigma=1).round(3)
    array([[ 2.562,  3.203,  4.135,  5.067,  5.708],
           [ 5.766,  6.407,  7.339,  8.271,  8.912],
           [10.427, 11.068, 12.   , 12.932, 13.573],
           [15.088, 15.729, 16.661, 17.593, 18.234],
           [18.292, 18.933, 19.865, 20.797, 21.438]])
    """)
def gaussian_filter(input: ArrayLike, sigma: float | Sequence[float], order: int | Sequence[int] = 0,
                    output: Output = None, mode: str | Sequence[str] = "reflect", cval: float = 0.0,
                    truncate: float = 4.0, *, radius: int | Sequence[int] | None = None,
                    axes: int | Sequence[int] | None = None, stream: Any = None,
                    threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, gaussian_filter, input, sigma, order, output, mode, cval, truncate,
                               radius=radius, axes=axes, stream=stream)
    if (binding := _plain_binding(input, output, cval, stream)) is not None:
        passes = _gaussian_passes(input.ndim, sigma, order, mode, truncate, radius, axes)
        return binding.separable(input, None, passes, cval, 0.0, 0)
    src = _filter_input(input)
    passes = _gaussian_passes(src.ndim, sigma, order, mode, truncate, radius, axes)
    return _separable(src, passes, output, cval, src.dtype.kind == "c", stream)


@_args.memoize_plain
def _gaussian_passes(ndim, sigma, order, mode, truncate, radius, axes):
    """gaussian_filter's 1-D passes (one per axis whose sigma is not ~0)."""
    axes = _args.check_axes(axes, ndim)
    n = len(axes)
    sigmas = _args.normalize_sequence(sigma, n, "sigma")
    orders = _args.normalize_sequence(order, n, "order")
    modes = _args.normalize_sequence(mode, n, "mode")
    radii = _args.normalize_sequence(radius, n, "radius")
    return tuple(_gaussian_pass(ax, s, o, m, truncate, r)
                 for ax, s, o, m, r in zip(axes, sigmas, orders, modes, radii)
                 if _args.check_sigma(s) > 1e-15)


def _uniform_pass(axis, size, origin, mode):
    size = _args.check_size(size)
    origin = _args.check_origin(origin, size)
    return (axis, "uniform", (), size, origin, _args.mode_code(mode))


@_docs.filter_doc(
    '1-D uniform (box) filter.',
    'The mean of the `size` elements of each window along one axis (scipy.ndimage.uniform_filter1d).',
    ['input', 'size1d', 'axis', 'output', 'mode', 'cval', 'origin', 'stream', 'threads'],
    """
    >>> ndimage.uniform_filter1d([2, 8, 0, 4, 1, 9, 9, 0], size=3)
    array([4, 3, 4, 1, 4, 6, 6, 3])
    """)
def uniform_filter1d(input: ArrayLike, size: int, axis: int = -1, output: Output = None,
                     mode: str = "reflect", cval: float = 0.0, origin: int = 0, *, stream: Any = None,
                     threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, uniform_filter1d, input, size, axis, output, mode, cval, origin,
                               stream=stream)
    if (binding := _plain_binding(input, output, cval, stream)) is not None:
        passes = [_uniform_pass(_args.check_axis(axis, input.ndim), size, origin, mode)]
        return binding.separable(input, None, passes, cval, 0.0, 0)
    src = _filter_input(input)
    axis = _args.check_axis(axis, src.ndim)
    passes = [_uniform_pass(axis, size, origin, mode)]
    return _separable(src, passes, output, cval, src.dtype.kind == "c", stream)


@_docs.filter_doc(
    'Multidimensional uniform (box) filter.',
    'A sequence of 1-D uniform filters, one per axis (scipy.ndimage.uniform_filter).',
    ['input', 'size_box', 'output', 'modes', 'cval', 'origins', 'axes', 'stream', 'threads'],
    """
    >>> a = np.arange(16.0).reshape(4, 4)
    >>> ndimage.uniform_filter(a, size=3, mode='nearest')
    array([[ 1.66666667,  2.33333333,  3.33333333,  4.        ],
           [ 4.33333333,  5.        ,  6.        ,  6.66666667],
           [ 8.33333333,  9.        , 10.        , 10.66666667],
           [11.        , 11.66666667, 12.66666667, 13.33333333]])
    """)
def uniform_filter(input: ArrayLike, size: int | Sequence[int] = 3, output: Output = None,
                   mode: str | Sequence[str] = "reflect", cval: float = 0.0, origin: int | Sequence[int] = 0,
                   *, axes: int | Sequence[int] | None = None, stream: Any = None,
                   threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, uniform_filter, input, size, output, mode, cval, origin, axes=axes,
                               stream=stream)
    if (binding := _plain_binding(input, output, cval, stream)) is not None:
        passes = _uniform_passes(input.ndim, size, origin, mode, axes)
        return binding.separable(input, None, passes, cval, 0.0, 0)
    src = _filter_input(input)
    passes = _uniform_passes(src.ndim, size, origin, mode, axes)
    return _separable(src, passes, output, cval, src.dtype.kind == "c", stream)


@_args.memoize_plain
def _uniform_passes(ndim, size, origin, mode, axes):
    """uniform_filter's 1-D passes (one per axis whose size is over 1)."""
    axes = _args.check_axes(axes, ndim)
    n = len(axes)
    sizes = _args.normalize_sequence(size, n, "size")
    origins = _args.normalize_sequence(origin, n, "origin")
    modes = _args.normalize_sequence(mode, n, "mode")
    # As scipy, axes of size 1 or less (0 too) are left as they are.
    return tuple(_uniform_pass(ax, s, o, m) for ax, s, o, m in zip(axes, sizes, origins, modes)
                 if not (isinstance(s, numbers.Real) and s <= 1))


# ------------------------------------------------------- footprint filters

def _offsets(mask, origins):
    """Flat (taps x ndim) offsets of the True cells of `mask`, C order,
    relative to the output element (scipy's centre: shape // 2 + origin): a
    read-only int64 array (plans are memoised), which the bindings read as it
    is. (A list of Python ints had taken 40 bytes an offset: a MemoryError
    for footprints of 10**8 cells, which scipy filters.)"""
    if mask.ndim == 0:
        offsets = np.empty(0, np.int64)
    else:
        offsets = np.stack(np.nonzero(mask), axis=1).astype(np.int64, copy=False)
        offsets -= np.array([n // 2 + o for n, o in zip(mask.shape, origins)], np.int64)
        offsets = offsets.ravel()
    offsets.flags.writeable = False
    return offsets, int(np.count_nonzero(mask))


def _expand_to_input(ndim, axes, array, name):
    """An N-D footprint/weights for `axes` as one of the input's rank."""
    array = np.asarray(array)
    if array.ndim != len(axes):  # scipy's RuntimeError and words
        raise ArgumentError(f"{name}.ndim ({array.ndim}) must match len(axes) ({len(axes)})")
    if len(axes) < ndim:  # as scipy: the array's axes land on `axes` in increasing order
        array = np.expand_dims(array, tuple(ax for ax in range(ndim) if ax not in axes))
    return array


def _expand_origins(ndim, axes, origin):
    """Origins for every axis of the input. As scipy: with every axis listed,
    origin[k] belongs to axis k whatever the order of `axes`."""
    origins = _args.normalize_sequence(origin, len(axes), "origin")
    if len(axes) == ndim:
        return origins
    full = [0] * ndim
    for ax, o in zip(axes, origins):
        full[ax] = o
    return full


def _single_mode(mode, what):
    if not isinstance(mode, str) and np.iterable(mode):  # scipy: RuntimeError
        raise ArgumentError(f"A sequence of modes is not supported for {what}; pass one mode")
    return _args.mode_code(mode)


def _check_origins(shape, origins):
    for n, o in zip(shape, origins):
        _args.check_origin(o, n)


def _correlate_nd(input, weights, output, mode, cval, origin, axes, convolution, stream):
    src = _filter_input(input)
    w = _as_weights(weights)
    axes = _args.check_axes(axes, src.ndim)
    if w.dtype.kind == "c":
        if not convolution:  # as np.correlate: conjugate the weights
            w = w.conj()
        func = convolve if convolution else correlate
        return _complex_weights_filter(func, src, w, output, cval, mode=mode, origin=origin,
                                       axes=axes, stream=stream)
    if w.size == 0:  # as scipy: the weights' axes of length 0 are dropped, and no weight sums to 0
        if sum(n > 0 for n in w.shape) != len(axes):
            raise ArgumentError(f"weights.ndim ({sum(n > 0 for n in w.shape)}, without its axes of length 0) "
                                f"must match len(axes) ({len(axes)})")
        w = np.zeros((1,) * len(axes))
    w = _expand_to_input(src.ndim, axes, w, "weights")
    origins = _expand_origins(src.ndim, axes, origin)
    _check_origins(w.shape, origins)
    if convolution:
        w = w[(slice(None, None, -1),) * w.ndim]
        origins = [-o - (1 - n % 2) for o, n in zip(origins, w.shape)]
    _check_origins(w.shape, origins)
    mask = np.abs(w) > np.finfo(np.float64).eps  # scipy skips (near-)zero weights
    offsets, taps = _offsets(mask, origins)
    spec = ("sum", src.ndim, taps, offsets, np.ascontiguousarray(w[mask], np.float64), 0,
            _single_mode(mode, "correlate and convolve"))
    return _footprint_filter(src, spec, output, cval, src.dtype.kind == "c", stream)


@_docs.filter_doc(
    'Multidimensional correlation.',
    'Each output element is the sum of the weights times the input elements under them '
    "(scipy.ndimage.correlate). Weights near zero (within float64's epsilon) are skipped, as scipy skips "
    'them.',
    ['input', 'weights', 'output', 'mode', 'cval', 'origins', 'axes', 'stream', 'threads'],
    """
    >>> a = np.arange(12.0).reshape(3, 4)
    >>> ndimage.correlate(a, [[0, 1], [1, 0]], mode='nearest')
    array([[ 0.,  1.,  3.,  5.],
           [ 4.,  5.,  7.,  9.],
           [12., 13., 15., 17.]])
    """)
def correlate(input: ArrayLike, weights: ArrayLike, output: Output = None, mode: str = "reflect",
              cval: float = 0.0, origin: int | Sequence[int] = 0, *, axes: int | Sequence[int] | None = None,
              stream: Any = None, threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, correlate, input, weights, output, mode, cval, origin, axes=axes,
                               stream=stream)
    return _correlate_nd(input, weights, output, mode, cval, origin, axes, False, stream)


@_docs.filter_doc(
    'Multidimensional convolution.',
    'A correlation with the weights reversed along every axis (scipy.ndimage.convolve).',
    ['input', 'weights', 'output', 'mode', 'cval', 'origins', 'axes', 'stream', 'threads'],
    """
    >>> a = np.array([[1, 2, 0, 0], [5, 3, 0, 4], [0, 0, 0, 7], [9, 3, 0, 0]])
    >>> k = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0]])
    >>> ndimage.convolve(a, k, mode='constant', cval=0.0)
    array([[11, 10,  7,  4],
           [10,  3, 11, 11],
           [15, 12, 14,  7],
           [12,  3,  7,  0]])
    """)
def convolve(input: ArrayLike, weights: ArrayLike, output: Output = None, mode: str = "reflect",
             cval: float = 0.0, origin: int | Sequence[int] = 0, *, axes: int | Sequence[int] | None = None,
             stream: Any = None, threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, convolve, input, weights, output, mode, cval, origin, axes=axes,
                               stream=stream)
    return _correlate_nd(input, weights, output, mode, cval, origin, axes, True, stream)


def _real_operand(input):
    src = _filter_input(input)
    if src.dtype.kind == "c":
        raise TypeError("complex input is not supported by minimum, maximum, median, rank and "
                        "percentile filters")
    return src


def _min_max_1d(input, size, axis, output, mode, cval, origin, kind, stream):
    if (binding := _plain_binding(input, output, cval, stream)) is not None:
        return binding.separable(input, None, [_min_max_pass(input.ndim, size, axis, origin, mode, kind)], cval,
                                 0.0, 0)
    src = _real_operand(input)
    return _separable(src, [_min_max_pass(src.ndim, size, axis, origin, mode, kind)], output, cval,
                      stream=stream)


def _min_max_pass(ndim, size, axis, origin, mode, kind):
    axis = _args.check_axis(axis, ndim)
    size = _args.check_size(size)
    return (axis, kind, (), size, _args.check_origin(origin, size), _args.mode_code(mode))


@_docs.filter_doc(
    '1-D minimum filter.',
    'The smallest of the `size` elements of each window along one axis (scipy.ndimage.minimum_filter1d).',
    ['input', 'size1d', 'axis', 'output', 'mode', 'cval', 'origin', 'stream', 'threads'],
    """
    >>> ndimage.minimum_filter1d([2, 8, 0, 4, 1, 9, 9, 0], size=3)
    array([2, 0, 0, 0, 1, 1, 0, 0])
    """)
def minimum_filter1d(input: ArrayLike, size: int, axis: int = -1, output: Output = None,
                     mode: str = "reflect", cval: float = 0.0, origin: int = 0, *, stream: Any = None,
                     threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, minimum_filter1d, input, size, axis, output, mode, cval, origin,
                               stream=stream)
    return _min_max_1d(input, size, axis, output, mode, cval, origin, "minimum", stream)


@_docs.filter_doc(
    '1-D maximum filter.',
    'The largest of the `size` elements of each window along one axis (scipy.ndimage.maximum_filter1d).',
    ['input', 'size1d', 'axis', 'output', 'mode', 'cval', 'origin', 'stream', 'threads'],
    """
    >>> ndimage.maximum_filter1d([2, 8, 0, 4, 1, 9, 9, 0], size=3)
    array([8, 8, 8, 4, 9, 9, 9, 9])
    """)
def maximum_filter1d(input: ArrayLike, size: int, axis: int = -1, output: Output = None,
                     mode: str = "reflect", cval: float = 0.0, origin: int = 0, *, stream: Any = None,
                     threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, maximum_filter1d, input, size, axis, output, mode, cval, origin,
                               stream=stream)
    return _min_max_1d(input, size, axis, output, mode, cval, origin, "maximum", stream)


def _footprint_mask(size, footprint, axes, ndim_image):
    """The boolean footprint over `axes` from scipy's size/footprint pair."""
    if footprint is not None:
        if size is not None:
            _args.warn_at_caller("ignoring size because footprint is set")
        return np.asarray(_dispatch.on_host(footprint, "footprint"), dtype=bool)
    if size is None:
        raise ValueError("no footprint or filter size provided: pass size= or footprint=")
    sizes = [_args.check_size(s) for s in _args.normalize_sequence(size, len(axes), "size")]
    return np.ones(sizes, dtype=bool)


def _min_or_max(input, size, footprint, output, mode, cval, origin, axes, kind, stream):
    if footprint is None and (binding := _plain_binding(input, output, cval, stream)) is not None:
        kernel, work = _min_or_max_plan_of_size(input.ndim, size, None, origin, mode, axes, kind)
        return getattr(binding, _BINDING_NAME[kernel])(input, None, work, cval, 0.0, 0)
    src = _real_operand(input)
    plan = _min_or_max_plan if footprint is not None else _min_or_max_plan_of_size
    kernel, work = plan(src.ndim, size, footprint, origin, mode, axes, kind)
    if kernel is run_footprint:  # scipy's footprint filters compare integer data with cval in its dtype
        cval = _cval_in_dtype(cval, src.dtype)
    return _run(kernel, src, work, output, cval, False, stream)


def _min_or_max_plan(ndim, size, footprint, origin, mode, axes, kind):
    """(run_separable, passes) for a box footprint, one 1-D pass per axis;
    (run_footprint, spec) for any other."""
    axes = _args.check_axes(axes, ndim)
    mask = _footprint_mask(size, footprint, axes, ndim)
    if not mask.any():
        raise ValueError("an all-zero footprint is not supported")
    if mask.all():
        if mask.ndim != len(axes):  # scipy's words: its separable path compares the shape with len(axes)
            raise ArgumentError(f"footprint has {mask.ndim} dimensions but {len(axes)} are needed (one per "
                                "filtered axis): sequence argument must have length equal to input rank")
        origins = _args.normalize_sequence(origin, len(axes), "origin")
        modes = _args.normalize_sequence(mode, len(axes), "mode")
        return run_separable, tuple((ax, kind, (), n, _args.check_origin(o, n), _args.mode_code(m))
                                    for ax, n, o, m in zip(axes, mask.shape, origins, modes) if n > 1)
    mask = _expand_to_input(ndim, axes, mask, "footprint")
    origins = _expand_origins(ndim, axes, origin)
    _check_origins(mask.shape, origins)
    offsets, taps = _offsets(mask, origins)
    return run_footprint, (kind, ndim, taps, offsets, (), 0,
                           _single_mode(mode, "non-separable footprints"))


# Without a footprint array every argument is usually a plain scalar: memoised.
_min_or_max_plan_of_size = _args.memoize_plain(_min_or_max_plan)


@_docs.filter_doc(
    'Multidimensional minimum filter.',
    'The smallest element of each window (scipy.ndimage.minimum_filter). A box window runs as 1-D passes,'
    ' one per axis, and takes a sequence of modes; other footprints take one mode.',
    ['input', 'size', 'footprint', 'output', 'modes', 'cval', 'origins', 'axes', 'stream', 'threads'],
    """
    >>> a = np.array([[3, 2, 5, 1], [7, 6, 9, 3], [5, 8, 3, 7]])
    >>> ndimage.minimum_filter(a, size=2)
    array([[3, 2, 2, 1],
           [3, 2, 2, 1],
           [5, 5, 3, 3]])
    >>> ndimage.minimum_filter(a, footprint=[[1, 0, 1], [0, 1, 0]])
    array([[2, 2, 1, 1],
           [2, 3, 1, 1],
           [5, 7, 3, 3]])
    """)
def minimum_filter(input: ArrayLike, size: int | Sequence[int] | None = None,
                   footprint: ArrayLike | None = None, output: Output = None,
                   mode: str | Sequence[str] = "reflect", cval: float = 0.0, origin: int | Sequence[int] = 0,
                   *, axes: int | Sequence[int] | None = None, stream: Any = None,
                   threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, minimum_filter, input, size, footprint, output, mode, cval, origin,
                               axes=axes, stream=stream)
    return _min_or_max(input, size, footprint, output, mode, cval, origin, axes, "minimum", stream)


@_docs.filter_doc(
    'Multidimensional maximum filter.',
    'The largest element of each window (scipy.ndimage.maximum_filter). A box window runs as 1-D passes, '
    'one per axis, and takes a sequence of modes; other footprints take one mode.',
    ['input', 'size', 'footprint', 'output', 'modes', 'cval', 'origins', 'axes', 'stream', 'threads'],
    """
    >>> a = np.array([[3, 2, 5, 1], [7, 6, 9, 3], [5, 8, 3, 7]])
    >>> ndimage.maximum_filter(a, size=2)
    array([[3, 3, 5, 5],
           [7, 7, 9, 9],
           [7, 8, 9, 9]])
    >>> ndimage.maximum_filter(a, size=3, mode='constant', cval=0)
    array([[7, 9, 9, 9],
           [8, 9, 9, 9],
           [8, 9, 9, 9]])
    """)
def maximum_filter(input: ArrayLike, size: int | Sequence[int] | None = None,
                   footprint: ArrayLike | None = None, output: Output = None,
                   mode: str | Sequence[str] = "reflect", cval: float = 0.0, origin: int | Sequence[int] = 0,
                   *, axes: int | Sequence[int] | None = None, stream: Any = None,
                   threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, maximum_filter, input, size, footprint, output, mode, cval, origin,
                               axes=axes, stream=stream)
    return _min_or_max(input, size, footprint, output, mode, cval, origin, axes, "maximum", stream)


def _rank_position(rank, operation, taps):
    """0-based rank among `taps` values for rank, median and percentile."""
    if operation == "median":
        return taps // 2
    if operation == "percentile":
        percentile = float(rank)
        if percentile < 0.0:
            percentile += 100.0
        if not 0.0 <= percentile <= 100.0:
            raise ValueError(f"percentile must be within [-100, 100], got {rank}")
        return taps - 1 if percentile == 100.0 else int(float(taps) * percentile / 100.0)
    try:
        position = int(np.asarray(rank).item()) if np.ndim(rank) == 0 else None
    except (TypeError, ValueError):
        position = None
    if position is None or position != rank:
        raise TypeError(f"rank must be an integer, not {rank!r}")
    if position < 0:
        position += taps
    if not 0 <= position < taps:
        raise ValueError(f"rank {rank} is not within the footprint's {taps} elements")
    return position


def _rank_filter(input, rank, size, footprint, output, mode, cval, origin, axes, operation, stream):
    if footprint is None and (binding := _plain_binding(input, output, cval, stream)) is not None:
        spec, extreme = _rank_plan_of_size(input.ndim, rank, size, None, origin, mode, axes, operation)
        if extreme is None:  # else _min_or_max below
            return binding.footprint(input, None, spec, _cval_in_dtype(cval, input.dtype), 0.0, 0)
    src = _real_operand(input)
    plan = _rank_plan if footprint is not None else _rank_plan_of_size
    spec, extreme = plan(src.ndim, rank, size, footprint, origin, mode, axes, operation)
    if extreme is not None:  # scipy: the minimum or maximum filter
        kind, mask, origins, modes = extreme
        return _min_or_max(src.obj, None, mask, output, modes, cval, origins, None, kind, stream)
    return _footprint_filter(src, spec, output, _cval_in_dtype(cval, src.dtype), stream=stream)


def _cval_in_dtype(cval, dtype):
    """cval as scipy's rank filters compare it with integer data: converted
    to the dtype first, as C converts a double to an integer type on x86-64:
    truncated toward zero to an int (int64 for uint32, int64 and uint64),
    whose low bits are kept (uint8: -1 -> 255, 300 -> 44); NaN and values
    beyond that int give its minimum (uint8: 1e10 -> 0), uint64 values from
    2^64 up give 0. Float data: cval itself."""
    if dtype.kind not in "iu" or type(cval) is bool:
        return cval
    value = float(cval)
    width = 64 if dtype.itemsize == 8 or dtype == np.uint32 else 32
    low, high = -2.0**(width - 1), 2.0**(width if dtype == np.uint64 else width - 1)
    whole = int(value) if math.isfinite(value) and low <= value < high else -2**(width - 1)
    if dtype == np.uint64 and value >= high:  # gcc's uint64 conversion of values from 2^64 up
        whole = 0
    bits = 8 * dtype.itemsize
    whole %= 2**bits
    if dtype.kind == "i" and whole >= 2**(bits - 1):
        whole -= 2**bits
    return float(whole)


def _rank_plan(ndim, rank, size, footprint, origin, mode, axes, operation):
    """(footprint spec, None) for a rank filter; (None, (kind, mask, origins,
    modes)) for _min_or_max where the rank is the footprint's minimum or
    maximum. The mask is read, never written."""
    axes = _args.check_axes(axes, ndim)
    mask = _footprint_mask(size, footprint, axes, ndim)
    mask = _expand_to_input(ndim, axes, mask, "footprint")
    origins = _expand_origins(ndim, axes, origin)
    _check_origins(mask.shape, origins)
    taps = int(mask.sum())
    if taps == 0:
        raise ValueError("an all-zero footprint is not supported")
    position = _rank_position(rank, operation, taps)
    if position in (0, taps - 1):
        kind = "minimum" if position == 0 else "maximum"
        full_modes = mode
        if not isinstance(mode, str) and np.iterable(mode):
            full_modes = ["constant"] * ndim
            for ax, m in zip(axes, _args.normalize_sequence(mode, len(axes), "mode")):
                full_modes[ax] = m
            full_modes = tuple(full_modes)
        return None, (kind, mask, tuple(origins), full_modes)
    offsets, ntaps = _offsets(mask, origins)
    return ("rank", ndim, ntaps, offsets, (), position, _single_mode(mode, "rank filters")), None


_rank_plan_of_size = _args.memoize_plain(_rank_plan)


@_docs.filter_doc(
    'Multidimensional rank filter.',
    'The element of the given rank within each window (scipy.ndimage.rank_filter).',
    ['input', 'rank', 'size', 'footprint', 'output', 'mode', 'cval', 'origins', 'axes', 'stream', 'threads'],
    """
    >>> a = np.array([[3, 2, 5, 1], [7, 6, 9, 3], [5, 8, 3, 7]])
    >>> ndimage.rank_filter(a, rank=1, size=3)
    array([[2, 2, 1, 1],
           [3, 3, 2, 1],
           [5, 3, 3, 3]])
    """)
def rank_filter(input: ArrayLike, rank: int, size: int | Sequence[int] | None = None,
                footprint: ArrayLike | None = None, output: Output = None, mode: str = "reflect",
                cval: float = 0.0, origin: int | Sequence[int] = 0, *,
                axes: int | Sequence[int] | None = None, stream: Any = None,
                threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, rank_filter, input, rank, size, footprint, output, mode, cval, origin,
                               axes=axes, stream=stream)
    return _rank_filter(input, rank, size, footprint, output, mode, cval, origin, axes, "rank",
                        stream)


@_docs.filter_doc(
    'Multidimensional median filter.',
    'The median of each window (scipy.ndimage.median_filter); for an even count, the upper of the two '
    'middle elements, as scipy.',
    ['input', 'size', 'footprint', 'output', 'mode', 'cval', 'origins', 'axes', 'stream', 'threads'],
    """
    >>> a = np.array([[3, 2, 5, 1], [7, 6, 9, 3], [5, 8, 3, 7]])
    >>> ndimage.median_filter(a, size=3)
    array([[3, 5, 3, 3],
           [5, 5, 5, 3],
           [6, 6, 7, 7]])
    """)
def median_filter(input: ArrayLike, size: int | Sequence[int] | None = None,
                  footprint: ArrayLike | None = None, output: Output = None, mode: str = "reflect",
                  cval: float = 0.0, origin: int | Sequence[int] = 0, *,
                  axes: int | Sequence[int] | None = None, stream: Any = None,
                  threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, median_filter, input, size, footprint, output, mode, cval, origin,
                               axes=axes, stream=stream)
    return _rank_filter(input, 0, size, footprint, output, mode, cval, origin, axes, "median",
                        stream)


@_docs.filter_doc(
    'Multidimensional percentile filter.',
    'The element at the given percentile within each window (scipy.ndimage.percentile_filter).',
    ['input', 'percentile', 'size', 'footprint', 'output', 'mode', 'cval', 'origins', 'axes', 'stream', 'threads'],
    """
    >>> a = np.array([[3, 2, 5, 1], [7, 6, 9, 3], [5, 8, 3, 7]])
    >>> ndimage.percentile_filter(a, percentile=80, size=3)
    array([[7, 7, 6, 5],
           [7, 8, 8, 7],
           [8, 8, 8, 7]])
    """)
def percentile_filter(input: ArrayLike, percentile: float, size: int | Sequence[int] | None = None,
                      footprint: ArrayLike | None = None, output: Output = None, mode: str = "reflect",
                      cval: float = 0.0, origin: int | Sequence[int] = 0, *,
                      axes: int | Sequence[int] | None = None, stream: Any = None,
                      threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, percentile_filter, input, percentile, size, footprint, output, mode,
                               cval, origin, axes=axes, stream=stream)
    return _rank_filter(input, percentile, size, footprint, output, mode, cval, origin, axes,
                        "percentile", stream)


# ------------------------------------------------------------- derivatives

_EDGE_SMOOTHING = {"sobel": (1.0, 2.0, 1.0), "prewitt": (1.0, 1.0, 1.0)}


def _edge_filter(input, axis, output, mode, cval, operator, stream):
    """sobel/prewitt: a central difference along `axis`, smoothing across the others."""
    if (binding := _plain_binding(input, output, cval, stream)) is not None:
        return binding.separable(input, None, _edge_passes(input.ndim, axis, mode, operator), cval, 0.0, 0)
    src = _filter_input(input)
    passes = _edge_passes(src.ndim, axis, mode, operator)
    return _separable(src, passes, output, cval, src.dtype.kind == "c", stream)


@_args.memoize_plain
def _edge_passes(ndim, axis, mode, operator):
    axis = _args.check_axis(axis, ndim)
    modes = _args.normalize_sequence(mode, ndim, "mode")
    passes = [_correlate_pass(axis, (-1.0, 0.0, 1.0), 0, modes[axis])]
    passes += [_correlate_pass(ax, _EDGE_SMOOTHING[operator], 0, modes[ax])
               for ax in range(ndim) if ax != axis]
    return tuple(passes)


@_docs.filter_doc(
    'Sobel filter.',
    'The central difference [-1, 0, 1] along `axis`, smoothed with [1, 2, 1] along every other axis '
    '(scipy.ndimage.sobel).',
    ['input', 'axis_edge', 'output', 'modes', 'cval', 'stream', 'threads'],
    """
    >>> a = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1]], dtype=float)
    >>> ndimage.sobel(a, axis=1)
    array([[0., 4., 4., 0.],
           [0., 4., 4., 0.],
           [0., 4., 4., 0.]])
    """)
def sobel(input: ArrayLike, axis: int = -1, output: Output = None, mode: str | Sequence[str] = "reflect",
          cval: float = 0.0, *, stream: Any = None, threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, sobel, input, axis, output, mode, cval, stream=stream)
    return _edge_filter(input, axis, output, mode, cval, "sobel", stream)


@_docs.filter_doc(
    'Prewitt filter.',
    'The central difference [-1, 0, 1] along `axis`, smoothed with [1, 1, 1] along every other axis '
    '(scipy.ndimage.prewitt).',
    ['input', 'axis_edge', 'output', 'modes', 'cval', 'stream', 'threads'],
    """
    >>> a = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1]], dtype=float)
    >>> ndimage.prewitt(a, axis=1)
    array([[0., 3., 3., 0.],
           [0., 3., 3., 0.],
           [0., 3., 3., 0.]])
    """)
def prewitt(input: ArrayLike, axis: int = -1, output: Output = None, mode: str | Sequence[str] = "reflect",
            cval: float = 0.0, *, stream: Any = None, threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, prewitt, input, axis, output, mode, cval, stream=stream)
    return _edge_filter(input, axis, output, mode, cval, "prewitt", stream)


def _sum_over_axes(input, derivative, output, mode, cval, axes, square, stream, writes_into=False):
    """The core of generic_laplace (square=False) and
    generic_gradient_magnitude (square=True): derivative along each axis,
    (squared,) summed in the output dtype, (square-rooted). Every argument
    is checked before the first derivative writes; `derivative` runs with
    `stream` current in the input's library (_dispatch.stream_made_current).
    A `derivative` of gpufilt's own (`writes_into`) writes the axes after the
    second into the second's array; a caller's gets a dtype, as scipy's."""
    src = _filter_input(input)
    axes = _args.check_axes(axes, src.ndim)
    modes = _args.normalize_sequence(mode, len(axes), "mode")
    for m in modes:
        _args.mode_code(m)
    _args.check_cval(cval, src.dtype)
    if output is not None:
        _check_complex_output(output, output_dtype_of(output), src.dtype.kind == "c")
    if _dispatch.is_swapped_numpy(output):
        return _into_swapped(output, src, lambda native: _sum_over_axes(src.obj, derivative, native, mode, cval,
                                                                        axes, square, stream))
    out, result = _dispatch.resolve_output(output, src, src.dtype)
    dtype = output_dtype_of(out)
    target = out
    if square and dtype == np.float16:
        # Squares of float16 derivatives overflow from 256 up: sum them in float32.
        dtype = np.dtype(np.float32)
        target = _dispatch.allocate_like(src, dtype)
    elif result is not None and _dispatch.may_share_memory(src.obj, out):
        # Every derivative reads the whole input: never write into it early.
        target = _dispatch.allocate_like(src, dtype)

    def apply(op, a, b, into):
        if dtype.kind == "c" and op in ("square", "sqrt"):  # scipy's complex square and root
            _dispatch.complex_unary(op, a, into, src, stream)
        else:
            _dispatch.elementwise(op, a, b, into, src, stream)

    with _dispatch.stream_made_current(src, stream):
        if not axes:
            _dispatch.copy_into(src.obj, target, src, stream)
        else:
            derivative(src.obj, axes[0], target, modes[0], cval)
            if square:
                apply("square", target, target, target)
            tmp = None
            for ax, m in zip(axes[1:], modes[1:]):
                tmp = derivative(src.obj, ax, tmp if writes_into and tmp is not None else dtype, m, cval)
                if square:
                    apply("square", tmp, tmp, tmp)
                apply("add", target, tmp, target)
            if square:
                apply("sqrt", target, target, target)
        if target is not out:
            _dispatch.copy_into(target, out, src, stream)
    return _dispatch.hand_back(out, src) if result is None else result


@_docs.filter_doc(
    'N-D Laplace filter using a provided second derivative function.',
    "Sums `derivative2` along each axis, in the output's dtype (scipy.ndimage.generic_laplace). With "
    "`stream=`, `derivative2` runs with that stream current in the input's library (cupy, torch), so "
    "gpufilt's and cupy's work inside it is queued there.",
    ['input', 'derivative2', 'output', 'modes', 'cval', 'extra', 'axes', 'stream', 'threads'],
    """
    >>> def second(x, axis, output, mode, cval):
    ...     return ndimage.correlate1d(x, [1, -2, 1], axis, output, mode, cval)
    ...
    >>> a = np.zeros((3, 5))
    >>> a[1, 2] = 1
    >>> ndimage.generic_laplace(a, second)
    array([[ 0.,  0.,  1.,  0.,  0.],
           [ 0.,  1., -4.,  1.,  0.],
           [ 0.,  0.,  1.,  0.,  0.]])
    """)
def generic_laplace(input: ArrayLike, derivative2: Callable[..., Any], output: Output = None,
                    mode: str | Sequence[str] = "reflect", cval: float = 0.0,
                    extra_arguments: Sequence[Any] = (), extra_keywords: dict[str, Any] | None = None, *,
                    axes: int | Sequence[int] | None = None, stream: Any = None,
                    threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, generic_laplace, input, derivative2, output, mode, cval,
                               extra_arguments, extra_keywords, axes=axes, stream=stream)
    kw = extra_keywords or {}

    def derivative(x, axis, out, mode, cval):
        return derivative2(x, axis, out, mode, cval, *extra_arguments, **kw)
    return _sum_over_axes(input, derivative, output, mode, cval, axes, False, stream)


@_docs.filter_doc(
    'Gradient magnitude using a provided gradient function.',
    'The square root of the sum over the axes of `derivative` squared '
    '(scipy.ndimage.generic_gradient_magnitude). With `stream=`, `derivative` runs with that stream '
    "current in the input's library (cupy, torch).",
    ['input', 'derivative', 'output', 'modes', 'cval', 'extra', 'axes', 'stream', 'threads'],
    """
    >>> a = np.zeros((3, 5))
    >>> a[:, 2:] = 1
    >>> ndimage.generic_gradient_magnitude(a, ndimage.sobel)
    array([[0., 4., 4., 0., 0.],
           [0., 4., 4., 0., 0.],
           [0., 4., 4., 0., 0.]])
    """)
def generic_gradient_magnitude(input: ArrayLike, derivative: Callable[..., Any], output: Output = None,
                               mode: str | Sequence[str] = "reflect", cval: float = 0.0,
                               extra_arguments: Sequence[Any] = (), extra_keywords: dict[str,
                               Any] | None = None, *, axes: int | Sequence[int] | None = None,
                               stream: Any = None, threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, generic_gradient_magnitude, input, derivative, output, mode, cval,
                               extra_arguments, extra_keywords, axes=axes, stream=stream)
    kw = extra_keywords or {}

    def first(x, axis, out, mode, cval):
        return derivative(x, axis, out, mode, cval, *extra_arguments, **kw)
    return _sum_over_axes(input, first, output, mode, cval, axes, True, stream)


@_docs.filter_doc(
    'N-D Laplace filter based on approximate second derivatives.',
    'The sum over the axes of the second difference [1, -2, 1] (scipy.ndimage.laplace).',
    ['input', 'output', 'modes', 'cval', 'axes', 'stream', 'threads'],
    """
    >>> a = np.zeros((5, 5))
    >>> a[2, 2] = 1
    >>> ndimage.laplace(a)
    array([[ 0.,  0.,  0.,  0.,  0.],
           [ 0.,  0.,  1.,  0.,  0.],
           [ 0.,  1., -4.,  1.,  0.],
           [ 0.,  0.,  1.,  0.,  0.],
           [ 0.,  0.,  0.,  0.,  0.]])
    """)
def laplace(input: ArrayLike, output: Output = None, mode: str | Sequence[str] = "reflect", cval: float = 0.0,
            *, axes: int | Sequence[int] | None = None, stream: Any = None,
            threads: int | None = None) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, laplace, input, output, mode, cval, axes=axes, stream=stream)
    in_one_pass = _laplace_in_one_pass(input, output, mode, cval, axes, stream)
    if in_one_pass is not None:
        return in_one_pass

    def derivative2(x, axis, out, mode, cval):
        return correlate1d(x, [1, -2, 1], axis, out, mode, cval, 0, stream=stream)
    return generic_laplace(input, derivative2, output, mode, cval, axes=axes, stream=stream)


def _laplace_in_one_pass(input, output, mode, cval, axes, stream):
    """laplace by the backend's one-pass kernel (2-D and 3-D arrays, every
    axis, a real output of the input's dtype): the same values as the
    pass-by-pass sum below, one read and one write. None when it does not
    take the case."""
    src = _filter_input(input)
    if axes is not None or src.ndim not in (2, 3) or src.dtype.kind not in "biuf":
        return None
    if output is not None and (_is_dtype_like(output) or output_dtype_of(output) != src.dtype):
        return None
    _args.check_cval(cval, src.dtype)
    modes = [_args.mode_code(m) for m in _args.normalize_sequence(mode, src.ndim, "mode")]
    module, stream = _dispatch._backend(src, stream)
    out, result = _dispatch.resolve_output(output, src, src.dtype)
    if not module.laplace(src.obj, out, modes, float(cval), stream):
        return None
    return _dispatch.hand_back(out, src) if result is None else result


def _sigma_per_axis(ndim, axes, sigma):
    """sigma for every axis of the input, 0 on those not filtered."""
    sigmas = _args.normalize_sequence(sigma, len(axes), "sigma")
    if len(axes) == ndim:  # as scipy: sigma[k] belongs to axis k
        return sigmas
    full = [0] * ndim
    for ax, s in zip(axes, sigmas):
        full[ax] = s
    return full


@_docs.filter_doc(
    'Multidimensional Laplace filter using Gaussian second derivatives.',
    "The sum over the axes of the Gaussian's second derivative along each "
    '(scipy.ndimage.gaussian_laplace).',
    ['input', 'sigma', 'output', 'modes', 'cval', 'axes', 'stream', 'threads', 'kwargs'],
    """
    >>> a = np.zeros((5, 5))
    >>> a[2, 2] = 1
    >>> ndimage.gaussian_laplace(a, sigma=1).round(4)
    array([[ 0.0231,  0.0479,  0.0555,  0.0479,  0.0231],
           [ 0.0479,  0.001 , -0.0958,  0.001 ,  0.0479],
           [ 0.0555, -0.0958, -0.3183, -0.0958,  0.0555],
           [ 0.0479,  0.001 , -0.0958,  0.001 ,  0.0479],
           [ 0.0231,  0.0479,  0.0555,  0.0479,  0.0231]])
    """)
def gaussian_laplace(input: ArrayLike, sigma: float | Sequence[float], output: Output = None,
                     mode: str | Sequence[str] = "reflect", cval: float = 0.0, *,
                     axes: int | Sequence[int] | None = None, stream: Any = None, threads: int | None = None,
                     **kwargs) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, gaussian_laplace, input, sigma, output, mode, cval, axes=axes,
                               stream=stream, **kwargs)
    src = _filter_input(input)
    sigmas = _sigma_per_axis(src.ndim, _args.check_axes(axes, src.ndim), sigma)

    in_one_go = _derivative_sum_in_one_go(src, sigmas, 2, output, mode, cval, axes, stream, kwargs)
    if in_one_go is not None:
        return in_one_go

    def derivative2(x, axis, out, mode, cval):
        order = [0] * src.ndim
        order[axis] = 2
        return gaussian_filter(x, sigmas, order, out, mode, cval, stream=stream, **kwargs)
    return _sum_over_axes(src.obj, derivative2, output, mode, cval, axes, False, stream, writes_into=True)


def _derivative_sum_in_one_go(src, sigma, order, output, mode, cval, axes, stream, kwargs):
    """gaussian_laplace (order 2) or gaussian_gradient_magnitude (order 1)
    of a whole 3-D float32 or float64 array by the backend's derivative_sum
    (the CUDA backend's fused_derivative_sum): the values of the chains and
    sums of _sum_over_axes, with the pass along axis 0 that two chains share
    run once and the sums done as the chains store. None when it does not
    take the case (nothing written): arrays on the CPU among them, whose
    backend has no such kernels (its chains sweep their passes at once)."""
    if (src.device == "cpu" or axes is not None or src.ndim != 3 or src.dtype not in (np.float32, np.float64)
            or not set(kwargs) <= {"truncate", "radius"}):
        return None
    if output is not None and (_is_dtype_like(output) or output_dtype_of(output) != src.dtype):
        return None
    modes = _args.normalize_sequence(mode, 3, "mode")
    for m in modes:  # checked in _sum_over_axes's order: modes, cval, then sigma
        _args.mode_code(m)
    _args.check_cval(cval, src.dtype)
    chains = []
    for axis, axis_mode in enumerate(modes):  # scipy's: chain k in mode[k] along every axis
        orders = [0, 0, 0]
        orders[axis] = order
        chains.append(_gaussian_passes(3, sigma, tuple(orders), axis_mode, kwargs.get("truncate", 4.0),
                                       kwargs.get("radius"), None))
    if any(len(chain) != 3 for chain in chains):  # a sigma of 0 leaves an axis out
        return None
    module, stream = _dispatch._backend(src, stream)
    out, result = _dispatch.resolve_output(output, src, src.dtype)
    if not module.derivative_sum(src.obj, out, chains, float(cval), order == 1, stream):
        return None
    return _dispatch.hand_back(out, src) if result is None else result


@_docs.filter_doc(
    'Multidimensional gradient magnitude using Gaussian derivatives.',
    'The square root of the sum over the axes of the squared Gaussian first derivatives '
    '(scipy.ndimage.gaussian_gradient_magnitude); complex data as scipy computes it (complex squares and '
    'root).',
    ['input', 'sigma', 'output', 'modes', 'cval', 'axes', 'stream', 'threads', 'kwargs'],
    """
    >>> a = np.zeros((5, 5))
    >>> a[:, 2:] = 1
    >>> ndimage.gaussian_gradient_magnitude(a, sigma=1).round(4)
    array([[0.108 , 0.3632, 0.3638, 0.1218, 0.0133],
           [0.108 , 0.3632, 0.3638, 0.1218, 0.0133],
           [0.108 , 0.3632, 0.3638, 0.1218, 0.0133],
           [0.108 , 0.3632, 0.3638, 0.1218, 0.0133],
           [0.108 , 0.3632, 0.3638, 0.1218, 0.0133]])
    """)
def gaussian_gradient_magnitude(input: ArrayLike, sigma: float | Sequence[float], output: Output = None,
                                mode: str | Sequence[str] = "reflect", cval: float = 0.0, *,
                                axes: int | Sequence[int] | None = None, stream: Any = None,
                                threads: int | None = None, **kwargs) -> Any:
    if threads is not None:
        return _on_cpu_threads(threads, gaussian_gradient_magnitude, input, sigma, output, mode, cval,
                               axes=axes, stream=stream, **kwargs)
    src = _filter_input(input)
    in_one_go = _derivative_sum_in_one_go(src, sigma, 1, output, mode, cval, axes, stream, kwargs)
    if in_one_go is not None:
        return in_one_go

    def derivative(x, axis, out, mode, cval):
        order = [0] * src.ndim
        order[axis] = 1
        return gaussian_filter(x, sigma, order, out, mode, cval, stream=stream, **kwargs)
    return _sum_over_axes(src.obj, derivative, output, mode, cval, axes, True, stream, writes_into=True)


# Morphology: minima and maxima of gpufilt's filters (_morphology.py).
from ._morphology import (  # noqa: E402 - they call back into this module's filters
    binary_closing, binary_dilation, binary_erosion, binary_fill_holes, binary_opening, binary_propagation,
    black_tophat, generate_binary_structure, grey_closing, grey_dilation, grey_erosion, grey_opening,
    iterate_structure, morphological_gradient, morphological_laplace, white_tophat)

# The Fourier-domain filters (_fourier.py), on the output of numpy or cupy FFTs.
from ._fourier import fourier_ellipsoid, fourier_gaussian, fourier_shift, fourier_uniform  # noqa: E402

# Filters that call the caller's function (_generic.py).
from ._generic import generic_filter, generic_filter1d, vectorized_filter  # noqa: E402


# Dask arrays: every array function takes one and returns one, lazily
# (gpufilt.dask; depth= gives the reach of generic_laplace's and
# generic_gradient_magnitude's own derivatives there).
def _accepting_dask(function):
    @functools.wraps(function)
    def accepting(input, *args, **kwargs):
        if type(input).__module__.startswith("dask.array"):
            from . import dask
            if dask.is_dask_array(input):
                return dask.apply(function, input, *args, **kwargs)
        return function(input, *args, **kwargs)
    return accepting


for _name in __all__:
    if _name not in ("generate_binary_structure", "iterate_structure"):
        globals()[_name] = _accepting_dask(globals()[_name])
del _name
