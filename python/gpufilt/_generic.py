"""generic_filter, generic_filter1d and vectorized_filter: filters that call
the caller's function, with scipy.ndimage's (SciPy 1.17) semantics.

On the CPU the window gather and line extension are the C++ core's
(Reduce::Call in cpu_footprint.cpp, cpu_generic.cpp): a C function (a
scipy.LowLevelCallable or a numba cfunc) runs there at C speed on the call's
threads; a Python callable is called from there as scipy calls it. On the GPU
(cupy and other CUDA arrays) the function is a cupy.RawKernel or
cupy.ReductionKernel, as cupyx.scipy.ndimage takes them, or a numba CUDA
device function: _generic_cuda.py builds the kernel around it.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

from . import _args, _core, _dispatch, _docs
from ._errors import ArgumentError

ArrayLike = Any


# ------------------------------------------------------------ the function

def _is_low_level_callable(function):
    return type(function).__name__ == "LowLevelCallable" and type(function).__module__.startswith("scipy")


def _one_thread_unless_asked(function, threads):
    """threads= for a call: a scipy.LowLevelCallable (or a bare capsule) runs
    on one thread with the GIL held unless the caller asks for more (here, or
    by an enclosing call's threads=), as scipy runs it: scipy lets such a
    function set a Python error when it fails, which needs the GIL. A numba
    cfunc (nopython: no Python API) and a Python callable take the default."""
    if threads is None and (_is_low_level_callable(function) or type(function).__name__ == "PyCapsule"):
        enclosing = _core._set_call_threads(0)  # (0: the default; read, then put back)
        _core._set_call_threads(enclosing)
        return 1 if enclosing == 0 else None
    return threads


def _is_numba_cfunc(function):
    return type(function).__name__ == "CFunc" and type(function).__module__.startswith("numba")


# ctypes types as scipy.LowLevelCallable names them in a signature.
_CTYPES_NAMES = {"c_double": "double", "c_long": "long", "c_longlong": "long long", "c_int": "int",
                 "c_void_p": "void *", "c_short": "short", "c_ssize_t": "long"}


def _ctypes_signature(cfunc):
    """A numba cfunc's C signature as scipy.LowLevelCallable spells it:
    'int (double *, long, double *, void *)'."""
    import ctypes

    def name(t):
        if t is None:
            return "void"
        if issubclass(t, ctypes._Pointer):
            return name(t._type_) + " *"
        return _CTYPES_NAMES.get(t.__name__, t.__name__)
    proto = cfunc.ctypes
    return f"{name(proto.restype)} ({', '.join(name(t) for t in proto.argtypes)})"


def host_function(function, extra_arguments, extra_keywords):
    """What the _core binding takes for `function`: a LowLevelCallable's
    capsule, (signature, address, 0) for a numba cfunc, or the Python
    callable itself; and the extra arguments checked as scipy checks them."""
    if not isinstance(extra_arguments, tuple):  # scipy's RuntimeError and words
        raise ArgumentError("extra_arguments must be a tuple")
    if extra_keywords is None:
        extra_keywords = {}
    if not isinstance(extra_keywords, dict):
        raise ArgumentError("extra_keywords must be a dictionary")
    if _is_low_level_callable(function):
        function = tuple.__getitem__(function, 0)
    elif _is_numba_cfunc(function):
        function = (_ctypes_signature(function), int(function.address), 0)
    elif type(function).__name__ == "PyCapsule":
        pass
    elif _is_gpu_function(function):
        raise TypeError(f"function of type {type(function).__name__} runs on the GPU: pass a CUDA array "
                        "(cupy), or on the CPU a Python callable, a scipy.LowLevelCallable or a numba cfunc")
    elif not callable(function):
        raise ValueError(f"invalid callable given: function must be a Python callable, a scipy.LowLevelCallable "
                         f"or a numba cfunc, not {type(function).__name__}")
    return function, extra_arguments, extra_keywords


def _is_gpu_function(function):
    name, module = type(function).__name__, type(function).__module__
    return (module.startswith("cupy") and name in ("RawKernel", "ReductionKernel", "ElementwiseKernel")) or (
        module.startswith(("numba", "numba_cuda")) and ".cuda" in module)


# ------------------------------------------------------------- arguments

def _real_input(input):
    from .ndimage import _filter_input
    src = _filter_input(input)
    if src.dtype.kind == "c":
        raise TypeError("Complex type not supported")
    return src


def _window(src, size, footprint, origin, axes):
    """(mask over every axis of the input, origins per axis) from scipy's
    size/footprint/origin/axes, with scipy's checks and exceptions."""
    from .ndimage import _expand_origins, _expand_to_input
    axes = _args.check_axes(axes, src.ndim)
    if footprint is None:
        if size is None:
            raise ArgumentError("no footprint or filter size provided: pass size= or footprint=")
        sizes = [_args.check_size(s) if s != 0 else 0
                 for s in _args.normalize_sequence(size, len(axes), "size")]
        mask = np.ones(sizes, dtype=bool)
    else:
        mask = np.asarray(_dispatch.on_host(footprint, "footprint"), dtype=bool)
    if mask.ndim != len(axes) or 0 in mask.shape:  # scipy's RuntimeError and words
        raise ArgumentError(f"footprint.ndim ({mask.ndim}) must match len(axes) ({len(axes)})")
    mask = _expand_to_input(src.ndim, axes, mask, "footprint")
    origins = [operator.index(_args._scalar(o)) for o in _expand_origins(src.ndim, axes, origin)]
    for o, n in zip(origins, mask.shape):
        if not 0 <= n // 2 + o < n:
            raise ValueError(f"invalid origin {o} for a footprint of length {n}")
    return mask, origins


def _output_dtype(output, src):
    dtype = _dispatch.output_dtype_of(output) if output is not None else src.dtype
    if dtype is None or dtype.kind == "c" or not isinstance(dtype, np.dtype):
        raise ArgumentError(f"array type not supported: the output must be real, not {dtype}")
    return dtype


def _run_into(src, output, run, stream=None):
    """run(kernel_output) with scipy's output rules. A caller's output array
    is written only once the function has run everywhere: the kernel writes
    a new array, copied into it after (a function that fails leaves the
    caller's data untouched; an output sharing the input's memory is safe).
    Bool outputs take scipy's bytes (ndimage._into_bool's rule)."""
    from .ndimage import _into_swapped
    dtype = _output_dtype(output, src)
    if _dispatch.is_swapped_numpy(output):
        return _into_swapped(output, src, lambda native: _run_into(src, native, run, stream))
    out, result = _dispatch.resolve_output(output, src, dtype)
    target = out if result is None else _dispatch.allocate_like(src, dtype)
    run(_dispatch.uint8_view(target, src) if dtype == np.bool_ else target)
    if target is not out:
        _dispatch.copy_into(target, out, src, stream)
    return _dispatch.hand_back(out, src) if result is None else result


def _on_gpu(src):
    return src.device == "cuda"


# --------------------------------------------------------------- filters

@_docs.filter_doc(
    'Calculate a multidimensional filter using the given function.',
    'At each element the values under the footprint, as float64 in C order of the footprint, are passed to '
    '`function`, whose result is stored in the output (scipy.ndimage.generic_filter). On the CPU `function` is '
    'a Python callable (called once per element on the calling thread, as scipy calls it: slow), or a '
    'scipy.LowLevelCallable with '
    "scipy's signature ``int f(double *buffer, npy_intp filter_size, double *return_value, void *user_data)`` "
    'or a numba cfunc of that signature, which run at C speed: a cfunc on the call\'s threads without the '
    'GIL; a LowLevelCallable, which scipy lets call Python\'s C API, on one thread with the GIL held unless '
    '`threads` asks for more (then without the GIL: it must be thread-safe and not touch Python). A '
    "function that returns 0 raises the Python error it set, else RuntimeError, as scipy's. On the GPU "
    '`function` is a cupy.RawKernel or cupy.ReductionKernel, called '
    'as cupyx.scipy.ndimage.generic_filter calls it, or a numba CUDA device function ``f(window, '
    '*extra_arguments)`` returning the value.',
    ['input', 'function', 'size', 'footprint', 'output', 'mode', 'cval', 'origins', 'extra_function', 'axes',
     'stream', 'threads'],
    """
    >>> a = np.array([[3, 2, 5, 1], [7, 6, 9, 3], [5, 8, 3, 7]])
    >>> ndimage.generic_filter(a, np.ptp, size=2)
    array([[0, 1, 3, 4],
           [4, 5, 7, 8],
           [2, 3, 6, 6]])
    """)
def generic_filter(input: ArrayLike, function: Callable[..., float], size: int | Sequence[int] | None = None,
                   footprint: ArrayLike | None = None, output: Any = None, mode: str = "reflect",
                   cval: float = 0.0, origin: int | Sequence[int] = 0, extra_arguments: Sequence[Any] = (),
                   extra_keywords: dict[str, Any] | None = None, *, axes: int | Sequence[int] | None = None,
                   stream: Any = None, threads: int | None = None) -> Any:
    threads = _one_thread_unless_asked(function, threads)
    if threads is not None:
        from .ndimage import _on_cpu_threads
        return _on_cpu_threads(threads, generic_filter, input, function, size, footprint, output, mode, cval,
                               origin, extra_arguments, extra_keywords, axes=axes, stream=stream)
    if size is not None and footprint is not None:
        _args.warn_at_caller("ignoring size because footprint is set")
    src = _real_input(input)
    mask, origins = _window(src, size, footprint, origin, axes)
    mode_code = _args.mode_code(mode)
    cval = float(cval)
    if _on_gpu(src):
        from . import _generic_cuda
        return _generic_cuda.generic_filter(src, function, mask, origins, mode, cval, output, extra_arguments,
                                            extra_keywords, stream)
    _dispatch._backend(src, stream)  # (on the CPU: refuses a malformed stream= as every filter does)
    function, extra_arguments, extra_keywords = host_function(function, extra_arguments, extra_keywords)
    from .ndimage import _offsets
    offsets, taps = _offsets(mask, origins)

    def run(out):
        _core.generic_filter(src.obj, out, src.ndim, taps, offsets, mode_code, cval, function, extra_arguments,
                             extra_keywords)
    return _run_into(src, output, run)


@_docs.filter_doc(
    'Calculate a 1-D filter along the given axis.',
    'Each line along `axis`, extended by the window (`filter_size` and `origin`) as `mode` says, is passed to '
    '`function` as float64 with an output line to fill (scipy.ndimage.generic_filter1d). On the CPU `function` '
    "is a Python callable ``function(input_line, output_line, *extra_arguments, **extra_keywords)`` (scipy's; "
    'slow), or a scipy.LowLevelCallable with the signature ``int f(double *input_line, npy_intp input_length, '
    'double *output_line, npy_intp output_length, void *user_data)`` or a numba cfunc of that signature, at C '
    "speed, threaded as in generic_filter. On the GPU `function` is a cupy.RawKernel, called as "
    'cupyx.scipy.ndimage.generic_filter1d calls it, or a numba CUDA device function ``f(input_line, '
    'output_line, *extra_arguments)``.',
    ['input', 'function1d', 'filter_size', 'axis', 'output', 'mode', 'cval', 'origin', 'extra_function',
     'stream', 'threads'],
    """
    >>> def moving_sum(line_in, line_out):
    ...     line_out[:] = line_in[:-2] + line_in[1:-1] + line_in[2:]
    ...
    >>> ndimage.generic_filter1d([2.0, 8.0, 0.0, 4.0, 1.0], moving_sum, filter_size=3)
    array([12., 10., 12.,  5.,  6.])
    """)
def generic_filter1d(input: ArrayLike, function: Callable[..., Any], filter_size: int, axis: int = -1,
                     output: Any = None, mode: str = "reflect", cval: float = 0.0, origin: int = 0,
                     extra_arguments: Sequence[Any] = (), extra_keywords: dict[str, Any] | None = None, *,
                     stream: Any = None, threads: int | None = None) -> Any:
    threads = _one_thread_unless_asked(function, threads)
    if threads is not None:
        from .ndimage import _on_cpu_threads
        return _on_cpu_threads(threads, generic_filter1d, input, function, filter_size, axis, output, mode, cval,
                               origin, extra_arguments, extra_keywords, stream=stream)
    src = _real_input(input)
    _output_dtype(output, src)
    filter_size = operator.index(_args._scalar(filter_size))
    if filter_size < 1:
        raise ArgumentError(f"invalid filter size {filter_size}: filter_size must be at least 1")
    axis = _args.check_axis(axis, src.ndim)
    origin = operator.index(_args._scalar(origin))
    if not 0 <= filter_size // 2 + origin < filter_size:
        raise ValueError(f"invalid origin {origin} for a filter of size {filter_size}")
    mode_code = _args.mode_code(mode)
    cval = float(cval)
    if _on_gpu(src):
        from . import _generic_cuda
        return _generic_cuda.generic_filter1d(src, function, filter_size, axis, origin, mode, cval, output,
                                              extra_arguments, extra_keywords, stream)
    _dispatch._backend(src, stream)
    function, extra_arguments, extra_keywords = host_function(function, extra_arguments, extra_keywords)

    def run(out):
        _core.generic_filter1d(src.obj, out, axis, filter_size, origin, mode_code, cval, function, extra_arguments,
                               extra_keywords)
    return _run_into(src, output, run)


# ------------------------------------------------------ vectorized_filter

# scipy's modes as numpy.pad (and cupy.pad) name them.
_PAD_MODES = {"nearest": "edge", "reflect": "symmetric", "mirror": "reflect", "grid-mirror": "reflect",
              "grid-constant": "constant", "grid-wrap": "wrap", "constant": "constant", "wrap": "wrap",
              "valid": "valid"}


def _is_integral(value):
    """scipy's test: an integer dtype (bool is not one)."""
    return np.asarray(_args._scalar(value)).dtype.kind in "iu"


def _vectorized_arguments(input, function, size, footprint, mode, cval, origin, axes, batch_memory):
    """scipy's checks of vectorized_filter's arguments, in its order and words:
    (footprint mask or None, window shape, working axes, numpy.pad mode, cval,
    origins)."""
    if not callable(function):
        raise ValueError("`function` must be a callable.")
    if size is None and footprint is None:
        raise ValueError("Either `size` or `footprint` must be provided.")
    if size is not None and footprint is not None:
        raise ValueError("Either `size` or `footprint` may be provided, not both.")
    ndim = input.ndim
    if axes is None:
        axes = tuple(range(-ndim, 0))
    elif np.isscalar(axes):
        axes = (axes,)
    axes = tuple(axes)
    if len(axes) > ndim:
        raise ValueError("The length of `axes` may not exceed the dimensionality of `input`(`input.ndim`).")
    mask = None
    if size is not None:
        size = (size,) * len(axes) if np.isscalar(size) else tuple(size)
        if not all(_is_integral(s) and s > 0 for s in size):
            raise ValueError("All elements of `size` must be positive integers.")
        size = tuple(int(s) for s in size)
    else:
        mask = np.asarray(_dispatch.on_host(footprint, "footprint"), dtype=bool)
        size = mask.shape
    if len(axes) != len(size):
        raise ValueError("`axes` must be compatible with the dimensionality of the window specified by `size` "
                         "or `footprint`.")
    if origin is None:
        origin = (0,) * len(axes)
    else:
        origin = (origin,) * len(axes) if np.isscalar(origin) else tuple(origin)
        if not all(_is_integral(o) for o in origin):
            raise ValueError("All elements of `origin` must be integers.")
        if len(origin) != len(axes):
            raise ValueError("`origin` must be an integer or tuple of integers with length equal to the number "
                             "of axes.")
        origin = tuple(int(o) for o in origin)
    if mode not in _PAD_MODES:
        raise ValueError(f"`mode` must be one of {set(_PAD_MODES)}.")
    mode = _PAD_MODES[mode]
    if mode == "valid" and any(origin):
        raise ValueError("`mode='valid'` is incompatible with use of `origin`.")
    if cval is None:
        cval = 0.0
    elif mode != "constant":
        raise ValueError("Use of `cval` is compatible only with `mode='constant'`.")
    if np.asarray(_dispatch.on_host(cval, "cval")).dtype.kind not in "biufc":
        raise ValueError("`cval` must include only numbers.")
    memory = np.asarray(batch_memory)
    if memory.ndim != 0 or memory.dtype.kind not in "biuf" or not memory > 0:
        raise ValueError("`batch_memory` must be positive number.")
    return mask, size, axes, mode, cval, origin


@_docs.filter_doc(
    'Filter an array with a vectorized Python callable as the kernel.',
    'The input is padded as `mode` says and `function(windows, axis=...)` is called on a sliding-window view '
    'of it, the window axes last, in batches of at most `batch_memory` bytes of windows '
    '(scipy.ndimage.vectorized_filter): windows of a `size` are views, not copies (a `footprint`\'s cells are '
    'gathered into one axis, as scipy gathers them). Host data (numpy, buffers, CPU tensors, viewed as '
    'numpy) is padded with numpy, CUDA data (cupy, or other CUDA arrays viewed as cupy) with cupy on its GPU, '
    "and `function` takes arrays of that library; the result is `function`'s, in its dtype. Beyond "
    "scipy.ndimage's other filters: float16 and complex data, mode 'valid' (the output shrinks by the window), "
    'functions of several values per window.',
    ['input', 'function_vectorized', 'size_vectorized', 'footprint', 'output', 'mode_vectorized', 'cval_vectorized',
     'origins', 'axes', 'batch_memory', 'stream'],
    """
    >>> a = np.array([[3, 2, 5, 1], [7, 6, 9, 3], [5, 8, 3, 7]])
    >>> ndimage.vectorized_filter(a, np.median, size=3)
    array([[3., 5., 3., 3.],
           [5., 5., 5., 3.],
           [6., 6., 7., 7.]])
    """)
def vectorized_filter(input: ArrayLike, function: Callable[..., Any], *, size: int | Sequence[int] | None = None,
                      footprint: ArrayLike | None = None, output: Any = None, mode: str = "reflect",
                      cval: float | None = None, origin: int | Sequence[int] | None = None,
                      axes: int | Sequence[int] | None = None, batch_memory: int = 2**30,
                      stream: Any = None) -> Any:
    src = _dispatch.Operand(input if _dispatch.importable(input) else np.asarray(input), "input")
    if src.library == "cupy" or src.device == "cuda":
        import cupy as xp
        array = xp.asarray(src.obj)  # a view of the device memory (the CUDA Array Interface)
        swv = xp.lib.stride_tricks.sliding_window_view
    else:
        xp = np
        array = np.asarray(src.obj)  # a view (the buffer protocol; torch's CPU tensors: __array__)
        swv = np.lib.stride_tricks.sliding_window_view
    with _dispatch.stream_made_current(src, stream):
        return _vectorized(xp, swv, array, function, size, footprint, output, mode, cval, origin, axes,
                           batch_memory)


def _vectorized(xp, swv, array, function, size, footprint, output, mode, cval, origin, axes, batch_memory):
    mask, size, axes, pad_mode, cval, origin = _vectorized_arguments(array, function, size, footprint, mode, cval,
                                                                      origin, axes, batch_memory)
    n_axes = len(axes)
    working = tuple(range(-n_axes, 0))
    if array.size == 0:
        return array
    windowed = function
    if mask is not None:
        cells = [(Ellipsis, *map(int, c)) for c in np.argwhere(mask)]

        def windowed(x, axis=-1):  # the footprint's values in C order, one window axis
            # (stacked views, not a boolean index: on cupy that would wait for the device)
            values = xp.stack([x[c] for c in cells], axis=-1) if cells else x[..., xp.asarray(mask)]
            return function(values, axis=-1)
    if array.ndim == 0 and size == ():  # as scipy: the footprint selects from the 0-d input first
        return xp.asarray(windowed(array if mask is None else array[xp.asarray(mask)], axis=()))
    array = xp.moveaxis(array, axes, working)
    out = xp.moveaxis(output, axes, working) if output is not None else None
    if pad_mode != "valid":
        borders = tuple((n // 2 + o, (n - 1) // 2 - o) for n, o in zip(size, origin))
        kwargs = {"constant_values": cval} if pad_mode == "constant" else {}
        array = _dispatch.pad(xp, array, ((0, 0),) * (array.ndim - n_axes) + borders, pad_mode, **kwargs)
    view = swv(array, size, working)
    result = _in_batches(xp, view, windowed, working, n_axes, out, batch_memory)
    result = xp.moveaxis(result, working, axes)
    return output if output is not None else result


def _in_batches(xp, view, function, working, n_axes, out, batch_memory):
    """function(view, axis=working), along the view's first axis in batches
    of at most batch_memory bytes of windows, into `out` if given."""
    if working == ():
        return function(view, axis=working)
    batch_bytes = math.prod(view.shape[1:]) * view.dtype.itemsize
    per_batch = min(view.shape[0], batch_memory // batch_bytes)
    if per_batch < 1:
        raise ValueError("`batch_memory` is insufficient for minimum chunk size.")
    if per_batch == view.shape[0]:
        if out is None:
            return function(view, axis=working)
        out[...] = function(view, axis=working)
        return out
    for i in range(0, view.shape[0], int(per_batch)):
        j = min(i + int(per_batch), view.shape[0])
        part = function(view[i:j], axis=working)
        if out is None:
            out = xp.empty(view.shape[:-n_axes], dtype=part.dtype)
        out[i:j, ...] = part
    return out
