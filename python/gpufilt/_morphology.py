"""scipy.ndimage's grey and binary morphology, built on gpufilt's filters.

Flat grey morphology is a minimum or maximum filter: it runs on gpufilt's
min/max kernels (separable passes for boxes, footprint kernels otherwise),
on the CPU or the input's GPU. Binary erosion and dilation are minima and
maxima of the 0/1 image, with the border value as cval. Non-flat grey
morphology (a `structure` of heights) takes, per footprint element, the
shifted input minus (erosion) or plus (dilation) its height, in float64, by
the input's own library (numpy or cupy); the results are scipy's.
"""
from __future__ import annotations

import functools
import importlib
import operator
from typing import Any

import numpy as np

from . import _args, _core, _dispatch, _docs
from ._errors import ArgumentError

# np.pad's name for each scipy.ndimage filter mode (which repeats its
# extension beyond one period as np.pad does).
_PAD_MODES = {"reflect": "symmetric", "grid-mirror": "symmetric", "mirror": "reflect", "nearest": "edge",
              "wrap": "wrap", "grid-wrap": "wrap", "constant": "constant", "grid-constant": "constant"}


def _ndimage():
    from . import ndimage
    return ndimage


def _reversed(array):
    return array[(slice(None, None, -1),) * array.ndim]


def _library_of(array):
    """numpy or cupy: the namespace whose operations the non-flat and
    combining steps use for `array`."""
    if isinstance(array, np.ndarray) or not _dispatch.importable(array):  # lists and scalars, as numpy takes them
        return np
    src = _dispatch.Operand(array, "input")
    if src.library in ("numpy", "buffer"):
        return np
    if src.library == "cupy":
        return importlib.import_module("cupy")
    raise TypeError(f"this morphology needs numpy or cupy arrays, not {src.library} ones")


def _dilation_origins(axes, origin, shape_of):
    """grey_dilation's and binary_dilation's origins: the window reflected,
    so each origin negated, one less along axes of even length."""
    origins = _args.normalize_sequence(origin, len(axes), "origin")
    result = []
    for i, o in enumerate(origins):
        o = -_args.origin_number(o)
        if not shape_of(i) & 1:
            o -= 1
        result.append(o)
    return result


# The parameters of the grey operations, and of binary erosion and dilation (_docs.PARAMETERS).
_GREY_PARAMETERS = ['input', 'size_grey', 'footprint_grey', 'structure_grey', 'output', 'mode', 'cval', 'origins',
                    'axes', 'stream', 'threads']
_BINARY_PARAMETERS = ['input', 'structure', 'iterations', 'mask', 'output_binary', 'border_value', 'origins',
                      'brute_force', 'axes', 'stream', 'threads']

# Binary steps repeated a given number of times check every this many steps
# whether the last one changed anything, and stop if not.
_CHANGE_CHECK = 16

# What every binary operation's description ends with.
_BINARY_NOTE = (" Takes numpy and cupy arrays. On the GPU each step is one kernel over the 0/1 image (for "
                "structuring elements of up to 1024 elements along up to 4 axes; larger ones take a minimum or "
                "maximum filter a step), and repeated steps stop on the device once one changes nothing. "
                "A dilation until nothing changes (propagation, fill_holes) by an element symmetric about its "
                "centre is one union-find of the mask's components there; other steps until nothing changes "
                "read whether to go on after batches of 8, 16, ... 256 steps (a device-to-host read each).")


# ------------------------------------------------------------ grey morphology

def _check_window(size, footprint, structure):
    if size is None and footprint is None and structure is None:
        raise ValueError("size, footprint, or structure must be specified")


def _nonflat(input, footprint, structure, output, mode, cval, origin, axes, erosion, threads=None):
    """Non-flat grey erosion (dilation): per footprint element in C order,
    the shifted input minus (plus) its height, the minimum (maximum) of
    those. As scipy's C code computes it: the first element's term in
    double; every later one in the input's dtype (the height converted to
    it, the sum wrapped back into it); cval converted to the dtype first;
    the result converted to the output's dtype. numpy input: one C++ pass
    over the padded input (core/nonflat.hpp); cupy: the CUDA twin of that
    pass (up to 1024 taps); float16 and more taps: the input's library, a
    pass per element."""
    if threads is not None:
        _args.check_threads(threads)
    xp = _library_of(input)
    x = xp.asarray(input)
    if not x.dtype.isnative:  # (numpy only) the kernels read native numbers; scipy returns native ones
        x = x.astype(x.dtype.newbyteorder("="))
    if x.dtype.kind == "c":
        raise TypeError("Complex type not supported")
    _check_output_array(output)
    if output is not None and np.dtype(output if _is_dtype(output) else output.dtype).kind == "c":
        raise RuntimeError("array type not supported")  # scipy's C code, for a complex output
    heights = np.asarray(_dispatch.on_host(structure, "structure"), dtype=np.float64)
    mask = np.ones(heights.shape, bool) if footprint is None else \
        np.asarray(_dispatch.on_host(footprint, "footprint"), dtype=bool)
    axes = _args.check_axes(axes, x.ndim)
    if heights.ndim != len(axes) or mask.ndim != len(axes):
        raise ArgumentError("structure array has incorrect shape")
    if heights.shape != mask.shape:
        raise ArgumentError("structure and footprint must have the same shape")
    # scipy's placement: the element's axes land on `axes` in increasing order, the origins as
    # _expand_origins says; from here on every axis of the input is one of the element's.
    ndimage = _ndimage()
    heights = ndimage._expand_to_input(x.ndim, axes, heights, "structure")
    mask = ndimage._expand_to_input(x.ndim, axes, mask, "footprint")
    origins = ndimage._expand_origins(x.ndim, axes, origin)
    modes = _args.normalize_sequence(mode, len(axes), "mode")
    axes = tuple(range(x.ndim))
    if len(set(modes)) > 1:
        raise ArgumentError("A sequence of modes is not supported for non-separable footprints")
    mode = modes[0] if modes else mode if isinstance(mode, str) else "reflect"  # (0-d: no axis, no mode)
    pad_mode = _PAD_MODES.get(mode)
    if pad_mode is None:
        _args.mode_code(mode)  # its error
    widths = [(0, 0)] * x.ndim
    for ax, n, o in zip(axes, mask.shape, origins):
        centre = n // 2 + _args.check_origin(o, n)
        widths[ax] = (centre, n - 1 - centre)
    taps = [tuple(int(j) for j in tap) for tap in np.argwhere(mask)]  # in C order; () for a 0-d one
    if not taps:
        raise ValueError("All-zero footprint is not supported.")
    if x.size == 0:
        return _store(xp.zeros(x.shape, np.float64), x, output, xp)
    if x.ndim and x.dtype != np.float16 and (xp is np or len(taps) <= _dispatch.cuda_module().nonflat_max_taps):
        signed = np.array([-heights[t] if erosion else heights[t] for t in taps])
        wanted = x.dtype if output is None else np.dtype(output if _is_dtype(output) else output.dtype)
        # The kernels' results need no conversion into float64, nor into float32 from float32 (a
        # double's C conversion to float is its cast): they write those, into the caller's output
        # where they can (H200, 8192^2 float32, 3x3: the float64 temporary and its conversion made
        # this cost cupyx's time).
        if not (wanted == np.float64 or wanted == x.dtype == np.float32):
            result = _nonflat_on(xp, threads, x, taps, signed, widths, axes, pad_mode, cval, erosion, np.float64)
            return _store(result, x, output, xp)
        if output is not None and not _is_dtype(output) and tuple(output.shape) != tuple(x.shape):
            raise ArgumentError("output shape not correct")
        into = output if _kernel_writes_into(xp, output, wanted) else None
        result = _nonflat_on(xp, threads, x, taps, signed, widths, axes, pad_mode, cval, erosion, wanted, into)
        if output is None or _is_dtype(output) or result is output:
            return result
        output[...] = result
        return output
    # scipy reads a bool's byte as a number (its own results store bytes other than 0 and 1).
    values = (x.view(np.uint8) if x.dtype == np.bool_ else x).astype(np.float64)
    kwargs = {}
    if pad_mode == "constant":
        kwargs["constant_values"] = float(_c_cast(np.array(float(cval)), x.dtype, np))
    padded = _dispatch.pad(xp, values, widths, pad_mode, **kwargs) if x.ndim else values
    result = None
    for tap in taps:
        index = [slice(None)] * x.ndim
        for ax, j in zip(axes, tap):
            index[ax] = slice(int(j), int(j) + x.shape[ax])
        shifted = padded[(..., *index)]  # (an array, 0-d too)
        height = -heights[tap] if erosion else heights[tap]
        if result is None:  # the first term in double
            result = shifted + height
            continue
        term = _c_cast(shifted + float(_c_cast(np.array(height), x.dtype, np)), x.dtype, xp)
        result = xp.where(term < result if erosion else term > result, term, result)
    return _store(result, x, output, xp)


def _kernel_writes_into(xp, output, dtype):
    """True when the non-flat kernels can write their `dtype` results into
    `output` as it is: a C-contiguous array of `xp` of that dtype (its
    shape checked by the caller)."""
    return isinstance(output, xp.ndarray) and output.dtype == dtype and output.flags.c_contiguous \
        and getattr(output.flags, "writeable", True)


def _nonflat_on(xp, threads, *arguments):
    """_nonflat_padded, on `threads` CPU threads where asked (numpy input)."""
    if threads is None or xp is not np:
        return _nonflat_padded(xp, *arguments)
    return _ndimage()._on_cpu_threads(threads, _nonflat_padded, np, *arguments)


def _nonflat_padded(xp, x, taps, signed, widths, axes, pad_mode, cval, erosion, dtype, out=None):
    """_nonflat's terms for a numpy or cupy input (at least 1-d): the input
    padded in its own dtype (a temporary), each tap's offset into it, and
    one pass of the C++ or CUDA kernel; `dtype` results (float64, or float32
    for float32 input), into `out` where given (a C-contiguous array of
    that dtype and the input's shape; the kernels read only the padded
    copy, so it may be the input)."""
    values = x.view(np.uint8) if x.dtype == np.bool_ else x  # a bool's byte, as scipy reads it
    if pad_mode == "constant":
        padded = _padded_with(xp, values, widths, _c_convert(np.array(float(cval)), values.dtype, np)[()])
    else:
        padded = xp.ascontiguousarray(_dispatch.pad(xp, values, widths, pad_mode))
    steps = [stride // padded.itemsize for stride in padded.strides]
    offsets = np.array([sum(int(j) * steps[ax] for ax, j in zip(axes, tap)) for tap in taps], np.int64)
    out = xp.empty(x.shape, dtype) if out is None else out
    heights = _c_convert(signed, values.dtype, np)  # on the host: the kernels take them as parameters
    if xp is np:
        _core._nonflat_extreme(padded, heights, offsets, float(signed[0]), erosion, out)
    else:
        _dispatch.cuda_module()._nonflat_extreme(padded, heights, offsets, float(signed[0]), erosion, out,
                                                 xp.cuda.get_current_stream().ptr)
    return out


def _padded_with(xp, values, widths, constant):
    """`values` padded by `widths` with `constant`, a numpy scalar of their
    dtype, exactly (cupy.pad passes a uint64 constant beyond int64's range
    through a Python int and stores another value)."""
    shape = tuple(n + before + after for n, (before, after) in zip(values.shape, widths))
    padded = xp.empty(shape, values.dtype)
    padded.fill(constant)
    padded[tuple(slice(before, before + n) for n, (before, _) in zip(values.shape, widths))] = values
    return padded


def _c_convert(values, dtype, xp):
    """float64 `values` converted to `dtype` as C converts a double on
    x86-64 (through int32 for integers of 32 bits or fewer, int64 for
    uint32 and int64; bool as its byte, a uint8)."""
    dtype = np.dtype(dtype)
    with np.errstate(invalid="ignore", over="ignore"):  # out of range: as the C cast, without numpy's warning
        if dtype.kind == "f" or (dtype == np.uint64 and xp is np):
            return values.astype(dtype)
        if dtype == np.uint64:  # as x86-64 code converts to it: from 2**63 on, through int64 with the top bit flipped
            big = values >= 2.0**63
            low = _x86_truncate(xp.where(big, values - 2.0**63, values), np.int64, xp).view(np.uint64)
            return low ^ xp.where(big, np.uint64(1 << 63), np.uint64(0))
        wide = np.int64 if dtype.itemsize == 8 or dtype == np.uint32 else np.int32
        return _x86_truncate(values, wide, xp).astype(np.uint8 if dtype == np.bool_ else dtype)


def _x86_truncate(values, dtype, xp):
    """float64 `values` truncated to int32 or int64 as x86-64 does (and
    numpy there): NaN and values out of range give the lowest value. CUDA's
    conversion, which cupy's astype is, saturates and gives 0 for NaN."""
    if xp is np:
        return values.astype(dtype)
    bound = 2.0 ** (8 * np.dtype(dtype).itemsize - 1)
    return xp.where((values >= -bound) & (values < bound), values, -bound).astype(dtype)


def _c_cast(values, dtype, xp):
    """_c_convert's values, returned as float64."""
    return _c_convert(values, dtype, xp).astype(np.float64)


def _store(result, input, output, xp):
    """`result` (float64) into `output` (None, a dtype or an array) in the
    input's dtype unless asked otherwise, converted as scipy's C code
    converts (_c_cast; into bool, the value's byte)."""
    if output is not None and not _is_dtype(output) and tuple(output.shape) != tuple(result.shape):
        raise ArgumentError("output shape not correct")
    dtype = np.dtype(output.dtype if output is not None and not _is_dtype(output)
                     else output if output is not None else xp.asarray(input).dtype)
    converted = _c_convert(xp.asarray(result), dtype, xp)  # (a 0-d result of numpy arithmetic is a scalar)
    converted = converted.view(np.bool_) if dtype == np.bool_ else converted
    if output is None or _is_dtype(output):
        return converted
    output[...] = converted
    return output


def _is_dtype(output):
    return isinstance(output, (type, np.dtype, str))


def _check_output_array(output):
    """An output array that the input's library will write (output[...] =):
    the importer's rule for outputs (writable, no element overlapping
    another), checked before anything is computed."""
    if output is not None and not _is_dtype(output):
        _dispatch.check_writable_output(output)


@_docs.filter_doc(
    'Calculate a greyscale erosion.',
    'The minimum over the window of each element (flat: a minimum filter), or of the elements minus the '
    "structure's heights (scipy.ndimage.grey_erosion).",
    _GREY_PARAMETERS,
    """
    >>> a = np.array([[2, 1, 3, 0], [4, 8, 6, 5], [7, 2, 9, 1]])
    >>> ndimage.grey_erosion(a, size=(2, 2))
    array([[2, 1, 1, 0],
           [2, 1, 1, 0],
           [4, 2, 2, 1]])
    >>> ndimage.grey_erosion(a, structure=np.zeros((1, 3)))
    array([[1, 1, 0, 0],
           [4, 4, 5, 5],
           [2, 2, 1, 1]])
    """)
def grey_erosion(input: Any, size: Any = None, footprint: Any = None, structure: Any = None, output: Any = None,
                 mode: str = "reflect", cval: float = 0.0, origin: Any = 0, *, axes: Any = None,
                 stream: Any = None, threads: int | None = None) -> Any:
    _check_window(size, footprint, structure)
    if structure is not None:
        with _dispatch.stream_current_for(input, stream):  # _nonflat's cupy steps on `stream`
            return _nonflat(input, footprint, structure, output, mode, cval, origin, axes, erosion=True,
                            threads=threads)
    return _ndimage().minimum_filter(input, size, footprint, output, mode, cval, origin, axes=axes, stream=stream,
                                     threads=threads)


@_docs.filter_doc(
    'Calculate a greyscale dilation.',
    'The maximum over the reflected window of each element (flat: a maximum filter), or of the elements '
    "plus the reflected structure's heights (scipy.ndimage.grey_dilation).",
    _GREY_PARAMETERS,
    """
    >>> a = np.array([[2, 1, 3, 0], [4, 8, 6, 5], [7, 2, 9, 1]])
    >>> ndimage.grey_dilation(a, size=(2, 2))
    array([[8, 8, 6, 5],
           [8, 9, 9, 5],
           [7, 9, 9, 1]])
    """)
def grey_dilation(input: Any, size: Any = None, footprint: Any = None, structure: Any = None, output: Any = None,
                  mode: str = "reflect", cval: float = 0.0, origin: Any = 0, *, axes: Any = None,
                  stream: Any = None, threads: int | None = None) -> Any:
    _check_window(size, footprint, structure)
    ndim = _ndimage()._filter_input(input).ndim
    axes = _args.check_axes(axes, ndim)
    if structure is not None:
        structure = _reversed(np.asarray(_dispatch.on_host(structure, "structure")))
    if footprint is not None:
        footprint = _reversed(np.asarray(_dispatch.on_host(footprint, "footprint")))
    window = structure if structure is not None else footprint
    if window is not None and window.ndim != len(axes):
        name = "structure" if structure is not None else "footprint"
        raise ArgumentError(f"{name}.ndim ({window.ndim}) must match len(axes) ({len(axes)})")
    sizes = None if window is not None else _args.normalize_sequence(size, len(axes), "size")

    def length(i):
        return window.shape[i] if window is not None else int(_args._scalar(sizes[i]))
    origins = _dilation_origins(axes, origin, length)
    if structure is not None:
        with _dispatch.stream_current_for(input, stream):  # _nonflat's cupy steps on `stream`
            return _nonflat(input, footprint, structure, output, mode, cval, origins, axes, erosion=False,
                            threads=threads)
    return _ndimage().maximum_filter(input, size, footprint, output, mode, cval, origins, axes=axes, stream=stream,
                                     threads=threads)


def _warn_size_ignored(size, footprint):
    if size is not None and footprint is not None:
        _args.warn_at_caller("ignoring size because footprint is set")


@_docs.filter_doc(
    'Multidimensional greyscale opening.',
    'An erosion, then a dilation with the same window (scipy.ndimage.grey_opening).',
    _GREY_PARAMETERS,
    """
    >>> a = np.array([[2, 1, 3, 0], [4, 8, 6, 5], [7, 2, 9, 1]])
    >>> ndimage.grey_opening(a, size=(2, 2))
    array([[2, 1, 1, 0],
           [4, 2, 2, 1],
           [4, 2, 2, 1]])
    """)
def grey_opening(input: Any, size: Any = None, footprint: Any = None, structure: Any = None, output: Any = None,
                 mode: str = "reflect", cval: float = 0.0, origin: Any = 0, *, axes: Any = None,
                 stream: Any = None, threads: int | None = None) -> Any:
    _warn_size_ignored(size, footprint)
    kw = dict(axes=axes, stream=stream, threads=threads)
    eroded = grey_erosion(input, size, footprint, structure, None, mode, cval, origin, **kw)
    return grey_dilation(eroded, size, footprint, structure, output, mode, cval, origin, **kw)


@_docs.filter_doc(
    'Multidimensional greyscale closing.',
    'A dilation, then an erosion with the same window (scipy.ndimage.grey_closing).',
    _GREY_PARAMETERS,
    """
    >>> a = np.array([[2, 1, 3, 0], [4, 8, 6, 5], [7, 2, 9, 1]])
    >>> ndimage.grey_closing(a, size=(2, 2))
    array([[8, 8, 6, 5],
           [8, 8, 6, 5],
           [7, 7, 9, 1]])
    """)
def grey_closing(input: Any, size: Any = None, footprint: Any = None, structure: Any = None, output: Any = None,
                 mode: str = "reflect", cval: float = 0.0, origin: Any = 0, *, axes: Any = None,
                 stream: Any = None, threads: int | None = None) -> Any:
    _warn_size_ignored(size, footprint)
    kw = dict(axes=axes, stream=stream, threads=threads)
    dilated = grey_dilation(input, size, footprint, structure, None, mode, cval, origin, **kw)
    return grey_erosion(dilated, size, footprint, structure, output, mode, cval, origin, **kw)


def _combine(op, a, b, out, like, stream):
    """out = a op b (numpy's result rules, integers wrap) on like's device.
    "difference" is the tophats' subtraction: xor where input and result
    are both bool, as scipy's."""
    src = _ndimage()._filter_input(like)
    if op == "difference" and src.dtype == np.bool_ and _ndimage().output_dtype_of(out) == np.bool_:
        return _library_of(like).bitwise_xor(a, b, out=out)
    _dispatch.elementwise("subtract" if op == "difference" else op, a, b, out, src, stream)
    return out


def _refuse_bool(input, name):
    """numpy's TypeError for bool arithmetic, raised by scipy's gradient and
    laplace after their work; here before it."""
    if _ndimage()._filter_input(input).dtype == np.bool_:
        raise TypeError(f"{name} subtracts and adds: numpy boolean subtract is not supported (as in scipy); "
                        "pass uint8 data")


@_docs.filter_doc(
    'Multidimensional morphological gradient.',
    "The dilation minus the erosion, integers wrapping as numpy's do "
    '(scipy.ndimage.morphological_gradient). Bool data is refused, as numpy refuses bool subtraction in '
    'scipy.',
    _GREY_PARAMETERS,
    """
    >>> a = np.array([[2, 1, 3, 0], [4, 8, 6, 5], [7, 2, 9, 1]])
    >>> ndimage.morphological_gradient(a, size=(3, 3))
    array([[7, 7, 8, 6],
           [7, 8, 9, 9],
           [6, 7, 8, 8]])
    """)
def morphological_gradient(input: Any, size: Any = None, footprint: Any = None, structure: Any = None,
                           output: Any = None, mode: str = "reflect", cval: float = 0.0, origin: Any = 0, *,
                           axes: Any = None, stream: Any = None, threads: int | None = None) -> Any:
    _refuse_bool(input, "morphological_gradient")
    kw = dict(axes=axes, stream=stream, threads=threads)
    dilated = grey_dilation(input, size, footprint, structure, None, mode, cval, origin, **kw)
    eroded = grey_erosion(input, size, footprint, structure, output, mode, cval, origin, **kw)
    return _combine("subtract", dilated, eroded, eroded, input, stream)


@_docs.filter_doc(
    'Multidimensional morphological laplace.',
    'The dilation plus the erosion minus twice the input (scipy.ndimage.morphological_laplace).',
    _GREY_PARAMETERS,
    """
    >>> a = np.array([[2, 1, 3, 0], [4, 8, 6, 5], [7, 2, 9, 1]])
    >>> ndimage.morphological_laplace(a, size=(3, 3))
    array([[ 5,  7,  2,  6],
           [ 1, -6, -3, -1],
           [-4,  7, -8,  8]])
    """)
def morphological_laplace(input: Any, size: Any = None, footprint: Any = None, structure: Any = None,
                          output: Any = None, mode: str = "reflect", cval: float = 0.0, origin: Any = 0, *,
                          axes: Any = None, stream: Any = None, threads: int | None = None) -> Any:
    _refuse_bool(input, "morphological_laplace")
    kw = dict(axes=axes, stream=stream, threads=threads)
    src = _ndimage()._filter_input(input)
    dilated = grey_dilation(src.obj, size, footprint, structure, None, mode, cval, origin, **kw)
    result = grey_erosion(src.obj, size, footprint, structure, output, mode, cval, origin, **kw)
    _combine("add", dilated, result, result, src.obj, stream)
    _combine("subtract", result, src.obj, result, src.obj, stream)
    return _combine("subtract", result, src.obj, result, src.obj, stream)


@_docs.filter_doc(
    'Multidimensional white tophat filter.',
    'The input minus its opening; for bool data and a bool result, their xor '
    '(scipy.ndimage.white_tophat).',
    _GREY_PARAMETERS,
    """
    >>> a = np.array([[2, 1, 3, 0], [4, 8, 6, 5], [7, 2, 9, 1]])
    >>> ndimage.white_tophat(a, size=(2, 2))
    array([[0, 0, 2, 0],
           [0, 6, 4, 4],
           [3, 0, 7, 0]])
    """)
def white_tophat(input: Any, size: Any = None, footprint: Any = None, structure: Any = None, output: Any = None,
                 mode: str = "reflect", cval: float = 0.0, origin: Any = 0, *, axes: Any = None,
                 stream: Any = None, threads: int | None = None) -> Any:
    _warn_size_ignored(size, footprint)
    src = _ndimage()._filter_input(input)
    opened = grey_opening(src.obj, size, footprint, structure, output, mode, cval, origin, axes=axes, stream=stream,
                          threads=threads)
    return _combine("difference", src.obj, opened, opened, src.obj, stream)


@_docs.filter_doc(
    'Multidimensional black tophat filter.',
    'The closing minus the input; for bool data and a bool result, their xor '
    '(scipy.ndimage.black_tophat).',
    _GREY_PARAMETERS,
    """
    >>> a = np.array([[2, 1, 3, 0], [4, 8, 6, 5], [7, 2, 9, 1]])
    >>> ndimage.black_tophat(a, size=(2, 2))
    array([[6, 7, 3, 5],
           [4, 0, 0, 0],
           [0, 5, 0, 0]])
    """)
def black_tophat(input: Any, size: Any = None, footprint: Any = None, structure: Any = None, output: Any = None,
                 mode: str = "reflect", cval: float = 0.0, origin: Any = 0, *, axes: Any = None,
                 stream: Any = None, threads: int | None = None) -> Any:
    _warn_size_ignored(size, footprint)
    src = _ndimage()._filter_input(input)
    closed = grey_closing(src.obj, size, footprint, structure, output, mode, cval, origin, axes=axes, stream=stream,
                          threads=threads)
    return _combine("difference", closed, src.obj, closed, src.obj, stream)


# ---------------------------------------------------------- binary morphology

@_docs.numpy_sections(
    [("rank : int", "The number of dimensions."),
     ("connectivity : int", "The most steps (along distinct axes) from the centre to an element that is true.")],
    ("structure : numpy.ndarray of bool", "The 3 x ... x 3 element (a 0-d True for rank 0)."), """
    >>> import numpy as np
    >>> from gpufilt import ndimage
    >>> ndimage.generate_binary_structure(2, 1)
    array([[False,  True, False],
           [ True,  True,  True],
           [False,  True, False]])
    >>> ndimage.generate_binary_structure(2, 2)
    array([[ True,  True,  True],
           [ True,  True,  True],
           [ True,  True,  True]])
    """)
def generate_binary_structure(rank: int, connectivity: int) -> np.ndarray:
    """The 3 x ... x 3 structuring element of the neighbours within
    `connectivity` steps (scipy.ndimage.generate_binary_structure): 1 gives
    the faces' neighbours, `rank` every neighbour."""
    connectivity = max(int(connectivity), 1)
    if rank < 1:
        return np.array(True, dtype=bool)
    steps = np.abs(np.indices([3] * rank) - 1).sum(axis=0)
    return steps <= connectivity


@_docs.numpy_sections(
    [("structure : array_like", "The structuring element."),
     ("iterations : int", "How many times it is applied to itself."),
     ("origin : int or sequence of ints, optional", "An origin to scale with it.")],
    ("structure : numpy.ndarray of bool", "The grown element; with `origin` (and iterations >= 2), the pair "
     "(element, scaled origin)."), """
    >>> import numpy as np
    >>> from gpufilt import ndimage
    >>> ndimage.iterate_structure(ndimage.generate_binary_structure(2, 1), 2).astype(int)
    array([[0, 0, 1, 0, 0],
           [0, 1, 1, 1, 0],
           [1, 1, 1, 1, 1],
           [0, 1, 1, 1, 0],
           [0, 0, 1, 0, 0]])
    """)
def iterate_structure(structure: Any, iterations: int, origin: Any = None) -> Any:
    """A structuring element dilated by itself `iterations` - 1 times
    (scipy.ndimage.iterate_structure); with `origin`, also the origin scaled."""
    xp = _library_of(structure)  # the result is of the structure's library (numpy or cupy)
    structure = np.asarray(_dispatch.on_host(structure, "structure"))
    if iterations < 2:
        return xp.asarray(structure.copy())
    extra = iterations - 1
    shape = [n + extra * (n - 1) for n in structure.shape]
    start = [extra * (n // 2) for n in structure.shape]
    grown = np.zeros(shape, bool)
    grown[tuple(slice(s, s + n) for s, n in zip(start, structure.shape))] = structure != 0
    grown = xp.asarray(binary_dilation(grown, structure, iterations=extra))
    if origin is None:
        return grown
    origins = _args.normalize_sequence(origin, structure.ndim, "origin")
    return grown, [iterations * o for o in origins]


def _binary_structure(structure, ndim, axes):
    """The structuring element over `axes` as one of the input's rank."""
    if structure is None:
        structure = generate_binary_structure(len(axes), 1)
    else:
        structure = np.asarray(_dispatch.on_host(structure, "structure"), dtype=bool)
    if structure.ndim != len(axes):
        raise ArgumentError("structure and input must have same dimensionality")
    if structure.size < 1:
        raise ArgumentError("structure must not be empty")
    if len(axes) < ndim:
        structure = np.expand_dims(structure, tuple(ax for ax in range(ndim) if ax not in axes))
    return structure


def _iterations(iterations):
    """`iterations` as an int; scipy refuses floats, even integral ones."""
    try:
        return operator.index(iterations)
    except TypeError:
        raise TypeError("iterations parameter should be an integer") from None


def _check_c_long(iterations):
    """scipy's C code takes `iterations` as a C long (when the structure
    has an element to read)."""
    if not -2**63 <= iterations < 2**63:
        raise OverflowError("Python int too large to convert to C long")


def _border_value(value):
    """`border_value` as scipy's C code takes it: an integer (not a float)
    that fits in a C int."""
    return _c_int(operator.index(value))  # its TypeError: "... cannot be interpreted as an integer"


def _c_int(value):
    """An int that scipy's C code takes as a C int: OverflowError beyond."""
    if value > 2**31 - 1:
        raise OverflowError("signed integer is greater than maximum")
    if value < -2**31:
        raise OverflowError("signed integer is less than minimum")
    return value


def _binary(input, structure, iterations, mask, output, border_value, origin, axes, dilation, brute_force=False,
            stream=None, threads=None):
    """binary_erosion (dilation=False) or binary_dilation: the minimum (or
    maximum over the reflected element) of the 0/1 image, the border value
    beyond the edges, repeated `iterations` times (until nothing changes
    when below 1); where `mask` is False each step keeps its input."""
    nd = _ndimage()
    src = nd._filter_input(input)
    if src.dtype.kind == "c":
        raise TypeError("Complex type not supported")
    iterations = _iterations(iterations)
    if threads is not None:
        _args.check_threads(threads)
    axes = _args.check_axes(axes, src.ndim)
    element = _binary_structure(structure, src.ndim, axes)
    origins = list(_args.normalize_sequence(origin, len(axes), "origin"))
    full_origins = [0] * src.ndim
    for ax, o in zip(axes, origins):
        full_origins[ax] = _args.origin_index(o)
    if dilation:
        element = _reversed(element)
        full_origins = [-o - (0 if n & 1 else 1) for o, n in zip(full_origins, element.shape)]
    for o, n in zip(full_origins, element.shape):
        _args.check_origin(o, n)
    if iterations != 1 and not brute_force and element[tuple(n // 2 + o for n, o in zip(element.shape,
                                                                                      full_origins))]:
        _c_int(iterations - 1)  # scipy's C code takes the steps after the first as a C int
    mask_src = None if mask is None else nd._filter_input(mask)
    if mask_src is not None:
        if tuple(mask_src.shape) != tuple(src.shape):
            raise ArgumentError("mask and input must have equal sizes")
        if mask_src.dtype.kind == "c":
            raise RuntimeError("data type not supported")  # scipy's C code, for a complex mask
    border_value = _border_value(border_value)
    if output is not None and not _is_dtype(output) and _dispatch.dtype_kind(nd.output_dtype_of(output)) == "c":
        raise TypeError("Complex output type not supported")
    _check_output_array(output)
    if output is not None and not _is_dtype(output) and tuple(output.shape) != tuple(src.shape):
        raise ArgumentError("output shape not correct")
    xp = _library_of(src.obj)
    # Everything on `stream`, the library's own operations too: on cupy's
    # current stream, `input != 0` could read an input that work queued on
    # `stream` (binary_closing's dilation) has not written yet.
    with _dispatch.stream_made_current(src, stream):
        values = _repeated_steps(xp, src.obj, None if mask_src is None else mask_src.obj, element, full_origins,
                                 dilation, border_value != 0, iterations, stream, threads)
        if output is None or _is_dtype(output):
            return values  # scipy's: bool, whatever dtype is asked
        output[...] = values
    return output


def _repeated_steps(xp, input, mask, element, origins, dilation, border, iterations, stream, threads):
    """The bool result of `iterations` erosion steps (dilation: with the
    reflected element), or of steps until one changes nothing (below 1):
    on the GPU, union-find (symmetric elements, until nothing changes) or
    the step kernel, on the CPU, the spread (until nothing changes), where
    they take the element; full boxes of more than _STEP_MAX_BOX elements
    on the GPU by the box kernel where one of their sides is long enough
    (_BOX_KERNEL_MIN_LENGTH); else the minimum and maximum filters."""
    if not element.any():  # scipy: nothing to read, so an erosion holds everywhere and a dilation nowhere
        values = xp.asarray(input) != 0
        spread = xp.full(values.shape, not dilation, bool)
        return spread if mask is None else xp.where(xp.asarray(mask) == 0, values, spread)
    _check_c_long(iterations)
    taps = _taps(element, origins)
    # (A larger full box on the GPU: separable passes, the box kernel's or the minimum and maximum
    # filters', beat a kernel that reads every tap.)
    big_box = element.all() and len(taps) > _STEP_MAX_BOX
    if xp is not np and _fits_binary_steps(taps) and not (big_box and iterations >= 1):
        if iterations < 1 and _symmetric(taps) and xp.asarray(input).size < 2**31:
            if dilation:
                return _propagate_on_gpu(xp, input, mask, taps, border)
            # An erosion step is the complement's dilation step (by the same symmetric element, the
            # other border value), and so are their fixed points.
            eroded = _propagate_on_gpu(xp, xp.asarray(input) == 0, mask, taps, not border)
            return xp.logical_not(eroded, out=eroded)
        return _steps_on_gpu(xp, input, mask, taps, dilation, border, iterations)
    step = None
    if big_box and xp is not np and _box_kernel_takes(taps):
        step = functools.partial(_box_step_on_gpu, xp, taps.min(axis=0).tolist(), taps.max(axis=0).tolist(),
                                 dilation, border)
        if iterations == 1 and mask is None:
            return step(_byte_image(xp, input))  # the input's bytes as they are, where the kernel reads them
    values = xp.asarray(input) != 0
    keep = None if mask is None else xp.asarray(mask) == 0
    spread = _spread_on_cpu(values, keep, taps, dilation, border) if iterations < 1 and xp is np else None
    if spread is not None:
        return spread
    if step is None:
        filter = _ndimage().maximum_filter if dilation else _ndimage().minimum_filter
        step = functools.partial(_step_by_filter, filter, element, origins, border, stream, threads)
    return _repeat(xp, step, values, keep, iterations)


def _box_kernel_takes(taps):
    """True when the box kernel runs the full box of `taps` (more than one
    tap): a side of _BOX_KERNEL_MIN_LENGTH or more, none beyond its bound."""
    longest = int(np.ptp(taps, axis=0).max()) + 1
    return _BOX_KERNEL_MIN_LENGTH <= longest <= _dispatch.cuda_module().binary_max_box


def _step_by_filter(filter, element, origins, border, stream, threads, values):
    """A step of _repeated_steps on the minimum (erosion) or maximum filter
    of the 0/1 bytes `values`."""
    return filter(values.view(np.uint8), footprint=element, mode="constant", cval=float(border), origin=origins,
                  stream=stream, threads=threads).view(bool)


def _box_step_on_gpu(cupy, lo, hi, dilation, border, values):
    """A step of _repeated_steps by a full box, offsets lo to hi along each
    axis, from the 0/nonzero bytes of the cupy array `values` (bools, or
    _byte_image's): _cuda.binary_box, a pass an axis whose cost does not
    grow with the box."""
    values = cupy.ascontiguousarray(values)  # (a copy only of our own `!= 0` of a strided input)
    result = cupy.empty(values.shape, bool)
    passes = sum(h > l for l, h in zip(lo, hi))
    scratch = cupy.empty(values.shape, bool) if passes > 1 else None
    _dispatch.cuda_module().binary_box(values, result, scratch, lo, hi, dilation, border,
                                       cupy.cuda.get_current_stream().ptr)
    return result


def _repeat(xp, step, values, keep, iterations):
    """_repeated_steps by `step` (the bools of a step from the last one's),
    the last values kept where `keep` is set; whether a step changed
    anything is read on the host (every step below 1 iteration, every
    _CHANGE_CHECK steps else)."""
    count = 0
    while True:
        result = step(values)
        if keep is not None:
            result = xp.where(keep, values, result)
        count += 1
        # A step that changes nothing ends the repetition: below 1 iteration that is the stop, else
        # it is checked every _CHANGE_CHECK steps (a read on the GPU) so huge counts end too.
        check = iterations < 1 or count % _CHANGE_CHECK == 0
        changed = bool(xp.any(result != values)) if check else True
        values = result
        if (iterations >= 1 and count >= iterations) or not changed:
            return values


# The spread visits every tap of every element it reaches, the loop's steps
# cost a box filter's pass each: on this 2-core machine, one thread, the
# spread won up to 27 taps in 3-D (100^3: 16-32 ms against 48-112) and 81 in
# 2-D (600^2: 15-19 against 32-61), and lost from 125 (61-197 against 6-73)
# and 225. Beyond this, the loop.
_SPREAD_MAX_TAPS = 32


def _taps(element, origins):
    """The offsets (ntaps x ndim, int64) of the structuring element's set
    elements from the one it is centred on (shifted by `origins`)."""
    centre = np.array(element.shape) // 2 + np.array(origins, dtype=np.int64)
    return np.argwhere(element) - centre


def _fits_binary_steps(offsets):
    """True when the CUDA step kernel takes these taps (as its parameters):
    the axes they leave the element's line along, and the last one, count."""
    cuda = _dispatch.cuda_module()
    spanned = np.count_nonzero(offsets[:, :-1].any(axis=0)) + 1 if offsets.shape[1] else 0
    return (len(offsets) <= cuda.binary_max_taps and spanned <= cuda.binary_max_span
            and (offsets.size == 0 or np.abs(offsets).max() <= 127))


def _symmetric(offsets):
    """True when the taps hold the centre and each tap's opposite."""
    taps = set(map(tuple, offsets.tolist()))
    return (0,) * offsets.shape[1] in taps and all(tuple(-x for x in t) in taps for t in taps)


# Full boxes of more elements than this take separable passes on the GPU,
# the minimum and maximum filters' or the box kernel's (H200, 8192^2: 3x3
# 0.45 ms by the step kernel, 0.72 by the filters; 7x7 1.26 against 0.67).
_STEP_MAX_BOX = 9

# Full boxes at least this long along some axis take the box kernel on the
# GPU (_box_step_on_gpu), shorter ones the minimum and maximum filters,
# whose tiles are built for passes of up to 9 taps. H100, 8192^2 bools
# (ms, erosion / dilation): 5x5 0.40 / 0.42 by the box kernel against
# 0.23 / 0.22 by the filters, 9x9 0.41 / 0.42 against 0.30 / 0.29; 11x11
# 0.43 / 0.43 against 0.64 / 0.64, 31x31 0.57 / 0.46 against 0.85 / 0.85.
_BOX_KERNEL_MIN_LENGTH = 10

# Steps repeated until nothing changes run in batches, the device's counter
# read after each (the one host synchronisation): the first batch is short, as
# most spreads end within a few steps, and each later one twice as long. A
# given count runs its steps up to this many at once.
_FIRST_BATCH = 8
_MAX_BATCH = 256


def _byte_image(cupy, array):
    """`array` where _cuda.binary_steps can read it as 0/nonzero bytes:
    itself when it is a C-contiguous cupy array of one-byte integers or
    bools, else `array != 0` in a new one."""
    if isinstance(array, cupy.ndarray) and array.dtype.kind in "biu" and array.itemsize == 1 \
            and array.flags.c_contiguous:
        return array
    array = cupy.asarray(array)  # (a mask may be a numpy array or a list, as scipy takes it)
    image = cupy.empty(array.shape, bool)
    return cupy.not_equal(array, 0, out=image)


def _steps_on_gpu(cupy, input, mask, taps, dilation, border, iterations):
    """Binary erosion or dilation of a cupy array (or of the reflected
    element: dilation), `iterations` steps or until one changes nothing
    (iterations < 1), by _cuda.binary_steps into two new bool arrays in
    turn. Once a step changes nothing the later ones return at once on the
    GPU; the host reads whether to go on only after each batch of steps."""
    source = _byte_image(cupy, input)
    changeable = None if mask is None else _byte_image(cupy, mask)
    stream = cupy.cuda.get_current_stream().ptr
    last_change = cupy.zeros(1, np.int64)
    buffers = [cupy.empty(source.shape, bool), cupy.empty(source.shape, bool) if iterations != 1 else None]
    taps = taps.ravel().tolist()
    done, batch = 0, _FIRST_BATCH if iterations < 1 else _MAX_BATCH
    while True:
        count = batch if iterations < 1 else min(batch, iterations - done)
        _dispatch.cuda_module().binary_steps(source, buffers[0], buffers[1], changeable, taps, dilation, border,
                                             done + 1, count, last_change, stream)
        done += count
        result, other = buffers[(count - 1) % 2], buffers[count % 2]
        if done == iterations or int(last_change[0]) < done:
            return result
        source, buffers = result, [other, result]  # the next step reads the result, writes the other
        batch = min(2 * batch, _MAX_BATCH)


def _propagate_on_gpu(cupy, input, mask, taps, border):
    """Binary dilation of a cupy array until nothing changes, for an element
    symmetric about its centre: _cuda.binary_propagate's union-find, a few
    passes and no host read, where the steps take one pass (and a batch of
    them a read) per element of the longest path through the mask."""
    source = _byte_image(cupy, input)
    result = cupy.empty(source.shape, bool)
    _dispatch.cuda_module().binary_propagate(source, result, None if mask is None else _byte_image(cupy, mask),
                                             taps.ravel().tolist(), border, cupy.cuda.get_current_stream().ptr)
    return result


def _spread_on_cpu(values, keep, offsets, dilation, border):
    """Binary erosion or dilation repeated until nothing changes, for numpy
    data: one breadth-first spread of the values that change
    (_core._propagate_binary), where each step of the loop in _binary costs
    a pass over the whole array (binary_fill_holes took 7x scipy's time).
    None where the window does not hold its own centre: then a spread value
    need not stay, and only the loop is right."""
    if values.ndim == 0 or len(offsets) > _SPREAD_MAX_TAPS or not (offsets == 0).all(axis=1).any():
        return None
    result = np.ascontiguousarray(values).view(np.uint8)  # a new array: `values` is ours, never the input
    changeable = None if keep is None else np.ascontiguousarray(keep == 0).view(np.uint8)
    _core._propagate_binary(result, changeable, np.ascontiguousarray(offsets, dtype=np.int64),
                            1 if dilation else 0, int(border))
    return result.view(bool)


@_docs.filter_doc(
    'Multidimensional binary erosion.',
    'An element stays true where every element of the structuring element over it is true (the border '
    'value beyond the edges) (scipy.ndimage.binary_erosion).' + _BINARY_NOTE,
    _BINARY_PARAMETERS,
    """
    >>> a = np.zeros((5, 5), dtype=bool)
    >>> a[1:4, 1:4] = True
    >>> ndimage.binary_erosion(a).astype(int)
    array([[0, 0, 0, 0, 0],
           [0, 0, 0, 0, 0],
           [0, 0, 1, 0, 0],
           [0, 0, 0, 0, 0],
           [0, 0, 0, 0, 0]])
    """)
def binary_erosion(input: Any, structure: Any = None, iterations: int = 1, mask: Any = None, output: Any = None,
                   border_value: int = 0, origin: Any = 0, brute_force: bool = False, *,
                   axes: Any = None, stream: Any = None, threads: int | None = None) -> Any:
    return _binary(input, structure, iterations, mask, output, border_value, origin, axes, False, brute_force,
                   stream, threads)


@_docs.filter_doc(
    'Multidimensional binary dilation.',
    'An element becomes true where any element of the reflected structuring element over it is true '
    '(scipy.ndimage.binary_dilation).' + _BINARY_NOTE,
    _BINARY_PARAMETERS,
    """
    >>> a = np.zeros((5, 5), dtype=bool)
    >>> a[2, 2] = True
    >>> ndimage.binary_dilation(a).astype(int)
    array([[0, 0, 0, 0, 0],
           [0, 0, 1, 0, 0],
           [0, 1, 1, 1, 0],
           [0, 0, 1, 0, 0],
           [0, 0, 0, 0, 0]])
    """)
def binary_dilation(input: Any, structure: Any = None, iterations: int = 1, mask: Any = None, output: Any = None,
                    border_value: int = 0, origin: Any = 0, brute_force: bool = False, *,
                    axes: Any = None, stream: Any = None, threads: int | None = None) -> Any:
    return _binary(input, structure, iterations, mask, output, border_value, origin, axes, True, brute_force,
                   stream, threads)


@_docs.filter_doc(
    'Multidimensional binary opening.',
    '`iterations` erosions, then as many dilations (scipy.ndimage.binary_opening).' + _BINARY_NOTE,
    ['input', 'structure', 'iterations', 'output_binary', 'origins', 'mask', 'border_value', 'brute_force',
     'axes', 'stream', 'threads'],
    """
    >>> a = np.zeros((5, 5), dtype=bool)
    >>> a[1:4, 1:4] = True
    >>> a[4, 4] = True
    >>> ndimage.binary_opening(a, structure=np.ones((3, 3))).astype(int)
    array([[0, 0, 0, 0, 0],
           [0, 1, 1, 1, 0],
           [0, 1, 1, 1, 0],
           [0, 1, 1, 1, 0],
           [0, 0, 0, 0, 0]])
    """)
def binary_opening(input: Any, structure: Any = None, iterations: int = 1, output: Any = None, origin: Any = 0,
                   mask: Any = None, border_value: int = 0, brute_force: bool = False, *,
                   axes: Any = None, stream: Any = None, threads: int | None = None) -> Any:
    ndim = _ndimage()._filter_input(input).ndim
    if structure is None:
        structure = generate_binary_structure(len(_args.check_axes(axes, ndim)), 1)
    kw = dict(axes=axes, stream=stream, threads=threads)
    eroded = binary_erosion(input, structure, iterations, mask, None, border_value, origin, brute_force, **kw)
    return binary_dilation(eroded, structure, iterations, mask, output, border_value, origin, brute_force, **kw)


@_docs.filter_doc(
    'Multidimensional binary closing.',
    '`iterations` dilations, then as many erosions (scipy.ndimage.binary_closing).' + _BINARY_NOTE,
    ['input', 'structure', 'iterations', 'output_binary', 'origins', 'mask', 'border_value', 'brute_force',
     'axes', 'stream', 'threads'],
    """
    >>> a = np.ones((5, 5), dtype=bool)
    >>> a[2, 2] = False
    >>> ndimage.binary_closing(a).astype(int)
    array([[0, 0, 0, 0, 0],
           [0, 1, 1, 1, 0],
           [0, 1, 1, 1, 0],
           [0, 1, 1, 1, 0],
           [0, 0, 0, 0, 0]])
    """)
def binary_closing(input: Any, structure: Any = None, iterations: int = 1, output: Any = None, origin: Any = 0,
                   mask: Any = None, border_value: int = 0, brute_force: bool = False, *,
                   axes: Any = None, stream: Any = None, threads: int | None = None) -> Any:
    ndim = _ndimage()._filter_input(input).ndim
    if structure is None:
        structure = generate_binary_structure(len(_args.check_axes(axes, ndim)), 1)
    kw = dict(axes=axes, stream=stream, threads=threads)
    dilated = binary_dilation(input, structure, iterations, mask, None, border_value, origin, brute_force, **kw)
    return binary_erosion(dilated, structure, iterations, mask, output, border_value, origin, brute_force, **kw)


@_docs.filter_doc(
    'Multidimensional binary propagation.',
    'Dilations of the input within `mask`, repeated until nothing changes '
    '(scipy.ndimage.binary_propagation).' + _BINARY_NOTE,
    ['input', 'structure', 'mask', 'output_binary', 'border_value', 'origins', 'axes', 'stream', 'threads'],
    """
    >>> marker = np.zeros((4, 5), dtype=bool)
    >>> marker[0, 0] = True
    >>> mask = np.array([[1, 1, 0, 0, 1], [0, 1, 0, 0, 1], [0, 1, 1, 0, 0], [1, 0, 0, 0, 1]], dtype=bool)
    >>> ndimage.binary_propagation(marker, mask=mask).astype(int)
    array([[1, 1, 0, 0, 0],
           [0, 1, 0, 0, 0],
           [0, 1, 1, 0, 0],
           [0, 0, 0, 0, 0]])
    """)
def binary_propagation(input: Any, structure: Any = None, mask: Any = None, output: Any = None,
                       border_value: int = 0, origin: Any = 0, *, axes: Any = None, stream: Any = None,
                       threads: int | None = None) -> Any:
    return binary_dilation(input, structure, -1, mask, output, border_value, origin, axes=axes, stream=stream,
                           threads=threads)


@_docs.filter_doc(
    'Fill the holes in binary objects.',
    'Every background element that the background connected to the border cannot reach becomes true '
    '(scipy.ndimage.binary_fill_holes). A dtype given as `output` is ignored: the result is bool, as '
    "scipy's." + _BINARY_NOTE,
    ['input', 'structure', 'output_binary', 'origins', 'axes', 'stream', 'threads'],
    """
    >>> a = np.zeros((5, 5), dtype=bool)
    >>> a[1:4, 1:4] = True
    >>> a[2, 2] = False
    >>> ndimage.binary_fill_holes(a).astype(int)
    array([[0, 0, 0, 0, 0],
           [0, 1, 1, 1, 0],
           [0, 1, 1, 1, 0],
           [0, 1, 1, 1, 0],
           [0, 0, 0, 0, 0]])
    """)
def binary_fill_holes(input: Any, structure: Any = None, output: Any = None, origin: Any = 0, *,
                      axes: Any = None, stream: Any = None, threads: int | None = None) -> Any:
    src = _ndimage()._filter_input(input)
    if output is not None and not _is_dtype(output):  # scipy's checks and exception types
        if tuple(output.shape) != tuple(src.shape):
            raise ArgumentError("output shape not correct")
        if np.dtype(output.dtype).kind == "c":
            raise TypeError("Complex output type not supported")
    _check_output_array(output)
    xp = _library_of(src.obj)
    with _dispatch.stream_made_current(src, stream):
        background = xp.logical_not(xp.asarray(src.obj))
        seed = xp.zeros(src.shape, bool)
        outside = binary_dilation(seed, structure, -1, background, None, 1, origin, axes=axes, stream=stream,
                                  threads=threads)
        filled = xp.logical_not(outside)
        if output is None or _is_dtype(output):
            return filled  # a bool array whatever dtype `output` names, as scipy's
        output[...] = filled
    return output
