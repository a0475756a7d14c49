"""Argument normalisation shared by the filters, with scipy.ndimage's rules
and clearer messages. Every check raises before any data is touched."""
from __future__ import annotations

import functools
import numbers
import operator
import os
import sys
import warnings
from collections.abc import Iterable

import numpy as np

from ._errors import ArgumentError

try:
    from numpy.exceptions import AxisError
except ImportError:  # numpy < 1.25
    AxisError = np.AxisError

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_at_caller(message, category=UserWarning):
    """warnings.warn pointed at the caller's line: the first frame outside
    gpufilt, however deep inside it (and behind its dask wrapper) the
    warning is raised."""
    frame, level = sys._getframe(1), 2  # level 2: warn_at_caller's caller
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


# scipy.ndimage's filter mode codes (_extend_mode_to_code with is_filter=True).
MODES = {
    "nearest": 0, "wrap": 1, "grid-wrap": 1, "reflect": 2, "grid-mirror": 2,
    "mirror": 3, "constant": 4, "grid-constant": 4,
}


# Exact types whose equal values behave alike in every check below (bool,
# numpy scalars and sequences are left out: True == 1 and 1 == 1.0, yet
# order=1.0 is refused where order=1 is not).
_PLAIN_TYPES = frozenset({int, float, str, type(None)})


class _NotPlain(Exception):
    """Raised inside memoize_plain's cache for arguments it must not keep."""


def memoize_plain(func):
    """`func` memoised for calls whose arguments all have an exact type of
    _PLAIN_TYPES; other calls run it directly. For argument normalisation
    that a filter repeats on every call (1-D passes, Gaussian taps): `func`
    must be pure (no warnings) and return immutable values. Errors are never
    cached, so a bad argument raises on every call as before."""

    def plain_only(*args):
        for arg in args:
            if type(arg) not in _PLAIN_TYPES:
                raise _NotPlain
        return func(*args)

    # The cache is keyed on each argument's exact type too (typed=True), and
    # only calls of plain types fill it, so a call with any other type never
    # finds an entry: the type test runs on misses only.
    cached = functools.lru_cache(maxsize=256, typed=True)(plain_only)

    @functools.wraps(func)
    def memoized(*args):
        try:
            return cached(*args)
        except (_NotPlain, TypeError):  # TypeError: an unhashable argument (or func's own, raised again)
            return func(*args)
    return memoized


def mode_code(mode) -> int:
    try:
        return MODES[mode]
    except (KeyError, TypeError):  # scipy: RuntimeError('boundary mode not supported')
        raise ArgumentError(f"boundary mode not supported: {mode!r}; use one of "
                            f"{', '.join(repr(m) for m in MODES)}") from None


def normalize_sequence(value, rank: int, name: str) -> list:
    """A scalar repeated `rank` times, or a sequence of exactly `rank` items
    (0-d arrays among them, cupy's too, as Python scalars)."""
    if isinstance(value, (int, float, str)):  # scalars and mode names, without np.iterable
        return [value] * rank
    value = _scalar(value)
    if np.iterable(value) and not isinstance(value, str):
        items = [_scalar(item) for item in value]
        if len(items) != rank:  # scipy's RuntimeError and words
            raise ArgumentError(f"{name} has {len(items)} entries but {rank} are needed (one per "
                                "filtered axis): sequence argument must have length equal to input rank")
        return items
    return [value] * rank


def check_axis(axis, ndim: int) -> int:
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"axis must be an integer, not {type(axis).__name__}") from None
    if not -ndim <= axis < ndim:
        raise AxisError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim


def check_axes(axes, ndim: int) -> tuple:
    """scipy's `axes` argument as a tuple of distinct non-negative axes, with
    scipy's errors: TypeError for a non-integer, ValueError out of range."""
    if axes is None:
        return tuple(range(ndim))
    axes = _scalar(axes)
    if np.isscalar(axes):
        axes = (axes,)
    if not isinstance(axes, Iterable):
        raise ValueError("axes must be an integer, iterable of integers, or None")
    # operator.index's TypeError says "... cannot be interpreted as an integer", as scipy's.
    axes = tuple(operator.index(_scalar(ax)) for ax in axes)
    for ax in axes:
        if not -ndim <= ax < ndim:
            raise ValueError(f"specified axis: {ax} is out of range for an array of dimension {ndim}")
    axes = tuple(ax % ndim for ax in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"axes must be unique, got {axes}")
    return axes


def origin_index(origin) -> int:
    """An origin as an int: a TypeError for anything but an integer."""
    origin = _scalar(origin)
    try:
        return operator.index(origin)
    except TypeError:
        raise TypeError(f"origin must be an integer, not {type(origin).__name__}") from None


def origin_number(origin):
    """An origin as a number to compute with before check_origin (which
    checks a float's range before it must be an int, as scipy does): a
    TypeError for anything else."""
    value = _scalar(origin)
    return value if isinstance(value, numbers.Real) else origin_index(value)


def check_origin(origin, taps: int) -> int:
    """An origin checked against a window of `taps`, as an int. The range
    comes first (scipy's order): 7.0 for 3 taps is a ValueError, 1.0 a
    TypeError."""
    value = origin_number(origin)
    if value < -(taps // 2) or value > (taps - 1) // 2:  # as scipy compares: NaN passes, then is no int
        raise ValueError(f"invalid origin {value} for a filter of size {taps}; origin must "
                         f"satisfy -(size // 2) <= origin <= (size - 1) // 2")
    return origin_index(value)


def _scalar(value):
    """A 0-d array (numpy, or cupy from code written for cupyx: read to the
    host, explicitly) as its Python scalar; anything else as it is."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item") and not isinstance(value, np.generic):
        return value.item()
    return value


def check_size(size, name="size") -> int:
    size = _scalar(size)
    try:
        value = operator.index(size)
    except TypeError:
        if isinstance(size, numbers.Real) and float(size).is_integer():
            value = int(size)
        else:
            raise TypeError(f"{name} must be an integer, not {size!r}") from None
    if value < 1:  # scipy: RuntimeError('incorrect filter size')
        raise ArgumentError(f"incorrect filter size: {name} must be at least 1, got {value}")
    return value


def check_sigma(sigma) -> float:
    try:
        sigma = float(sigma)
    except (TypeError, ValueError):
        raise TypeError(f"sigma must be a real number, not {sigma!r}") from None
    if not sigma >= 0:  # also refuses nan
        raise ValueError(f"sigma must be non-negative, got {sigma}")
    return sigma


def check_order(order) -> int:
    try:
        order = operator.index(order)
    except TypeError:
        raise TypeError(f"order must be an integer, not {order!r}") from None
    if order < 0:
        raise ValueError(f"order must be non-negative, got {order}")
    return order


def check_threads(threads) -> int:
    """A filter's `threads=`: a positive integer."""
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral):
        raise TypeError(f"threads must be a positive integer or None, not {threads!r}")
    if threads < 1:
        raise ValueError(f"threads must be a positive integer or None, not {threads!r}")
    return min(int(threads), 1 << 31)  # fits C's int64; the kernels cap it at 4 per CPU (cpu_backend.cpp)


def check_cval(cval, input_dtype: np.dtype):
    if type(cval) in (int, float):  # the common case, without numpy's slower test
        return cval
    if np.iscomplexobj(cval) and input_dtype.kind != "c":
        raise ValueError("Cannot provide a complex-valued cval when the input is real.")
    return cval


def result_dtype(output_dtype, input_dtype: np.dtype, complex_output: bool) -> np.dtype:
    """Dtype a filter writes: the requested one, else the input's; promoted
    to complex (with scipy's warning) when the result must be complex."""
    if output_dtype is None:
        dtype = input_dtype
        return np.promote_types(dtype, np.complex64) if complex_output else dtype
    if complex_output and output_dtype.kind != "c":
        warn_at_caller("promoting specified output dtype to complex")
        return np.promote_types(output_dtype, np.complex64)
    return output_dtype
