"""generic_filter, generic_filter1d and vectorized_filter on the CPU, with
scipy.ndimage as the oracle: Python callables, scipy.LowLevelCallable and
numba cfuncs (C speed, in the core), every mode, origins, axes, footprints,
layouts, output arrays and dtypes, extra arguments, and the errors scipy
raises (leaving the caller's arrays untouched). The GPU paths are in
test_generic_cuda.py."""
from __future__ import annotations

import numpy as np
import pytest
import scipy
from scipy import ndimage as sp

from gpufilt import ndimage

from _helpers import MODES, assert_matches, random_array

DTYPES = ["bool", "uint8", "int8", "uint16", "int16", "int32", "uint32", "int64", "float32", "float64"]


def window_stat(x):
    """A function whose value depends on the order of the window's values,
    within their range (so within any output dtype that holds them: beyond
    it scipy's conversions are the platform's, see cast.hpp)."""
    w = np.arange(1, len(x) + 1.0)
    return float(np.dot(x, w) / w.sum()) if len(x) else 0.0


def line_stat(line_in, line_out):
    """generic_filter1d's: a weighted moving difference of the extended line."""
    n = len(line_out)
    k = len(line_in) - n + 1
    for i in range(n):
        line_out[i] = 0.25 * line_in[i + k - 1] + 0.25 * line_in[i] + 0.5 * line_in[i:i + k].min()


# ------------------------------------------------------------- C functions

try:
    import numba
    from numba import types

    WINDOW_SIG = types.intc(types.CPointer(types.float64), types.intp, types.CPointer(types.float64), types.voidptr)
    LINE_SIG = types.intc(types.CPointer(types.float64), types.intp, types.CPointer(types.float64), types.intp,
                          types.voidptr)

    @numba.cfunc(WINDOW_SIG)
    def c_window_stat(values, n, result, user_data):
        total, weights = 0.0, 0.0
        for i in range(n):
            total += values[i] * (i + 1.0)
            weights += i + 1.0
        result[0] = total / weights if n else 0.0
        return 1

    @numba.cfunc(WINDOW_SIG)
    def c_fails(values, n, result, user_data):
        return 0

    @numba.cfunc(LINE_SIG)
    def c_line_stat(line_in, in_length, line_out, out_length, user_data):
        k = in_length - out_length + 1
        for i in range(out_length):
            low = line_in[i]
            for j in range(k):
                low = min(low, line_in[i + j])
            line_out[i] = 0.25 * line_in[i + k - 1] + 0.25 * line_in[i] + 0.5 * low
        return 1

    @numba.cfunc(LINE_SIG)
    def c_line_fails(line_in, in_length, line_out, out_length, user_data):
        return 0
except ImportError:
    numba = None

needs_numba = pytest.mark.skipif(numba is None, reason="numba is not installed")


needs_vectorized = pytest.mark.skipif(not hasattr(sp, "vectorized_filter"),
                                      reason="scipy.ndimage.vectorized_filter is new in SciPy 1.16")


def low_level(cfunc):
    return scipy.LowLevelCallable(cfunc.ctypes)


# -------------------------------------------------------- generic_filter

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_generic_filter_python_matches_scipy(rng, dtype, mode):
    a = random_array(rng, (7, 9), dtype)
    footprint = np.array([[1, 0, 1], [0, 1, 1]], dtype=bool)
    expected = sp.generic_filter(a, window_stat, footprint=footprint, mode=mode, cval=1.5, origin=(0, -1))
    actual = ndimage.generic_filter(a, window_stat, footprint=footprint, mode=mode, cval=1.5, origin=(0, -1))
    assert actual.dtype == expected.dtype
    assert_matches(actual, expected)


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["low_level_callable", "cfunc"])
def test_generic_filter_c_function_matches_scipy(rng, dtype, mode, kind):
    a = random_array(rng, (6, 11, 5), dtype)
    function = low_level(c_window_stat) if kind == "low_level_callable" else c_window_stat
    footprint = rng.random((3, 4, 2)) < 0.6
    expected = sp.generic_filter(a, low_level(c_window_stat), footprint=footprint, mode=mode, cval=-2.0,
                                 origin=(1, -2, 0))
    actual = ndimage.generic_filter(a, function, footprint=footprint, mode=mode, cval=-2.0, origin=(1, -2, 0))
    assert_matches(actual, expected)


@needs_numba
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_generic_filter_threads_give_one_result(rng, threads):
    a = random_array(rng, (67, 130), "float64")
    expected = sp.generic_filter(a, low_level(c_window_stat), size=(3, 5))
    actual = ndimage.generic_filter(a, c_window_stat, size=(3, 5), threads=threads)
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("axes", [None, 0, (1,), (2, 0), (-1, 1)])
def test_generic_filter_axes_and_sizes(rng, axes):
    a = random_array(rng, (5, 6, 7), "float64")
    n = 3 if axes is None else len(np.atleast_1d(axes))
    size = tuple([3, 2, 4][:n])
    origin = tuple([0, -1, 1][:n])
    expected = sp.generic_filter(a, window_stat, size=size, origin=origin, axes=axes, mode="mirror")
    actual = ndimage.generic_filter(a, window_stat, size=size, origin=origin, axes=axes, mode="mirror")
    assert_matches(actual, expected)


@pytest.mark.parametrize("layout", ["C", "F", "strided", "negative"])
def test_generic_filter_layouts(rng, layout):
    base = random_array(rng, (12, 14), "float32")
    a = {"C": base, "F": np.asfortranarray(base), "strided": base[::2, 1::3], "negative": base[::-1, ::-2]}[layout]
    expected = sp.generic_filter(a, window_stat, size=3, mode="wrap")
    assert_matches(ndimage.generic_filter(a, window_stat, size=3, mode="wrap"), expected)


@pytest.mark.parametrize("out_dtype", ["float64", "float32", "int16", "uint8", "bool", "int64"])
def test_generic_filter_output_array_and_dtype(rng, out_dtype):
    a = random_array(rng, (8, 9), "float64") * 40
    expected = sp.generic_filter(a, window_stat, size=3, output=np.dtype(out_dtype))
    assert_matches(ndimage.generic_filter(a, window_stat, size=3, output=np.dtype(out_dtype)), expected)
    out = np.full(np.asfortranarray(a).shape, 7, dtype=out_dtype, order="F")
    result = ndimage.generic_filter(a, window_stat, size=3, output=out)
    assert result is out
    assert_matches(out, expected)


def test_generic_filter_in_place(rng):
    a = random_array(rng, (9, 10), "float64")
    expected = sp.generic_filter(a, np.median, size=3)
    assert ndimage.generic_filter(a, np.median, size=3, output=a) is a
    np.testing.assert_array_equal(a, expected)


def test_generic_filter_extra_arguments(rng):
    a = random_array(rng, (6, 7), "int16")

    def scaled(x, factor, shift=0.0):
        return x.sum() * factor + shift
    kwargs = dict(size=(2, 3), extra_arguments=(0.5,), extra_keywords={"shift": 3.0})
    assert_matches(ndimage.generic_filter(a, scaled, **kwargs), sp.generic_filter(a, scaled, **kwargs))


def test_generic_filter_lists_scalars_and_0d():
    assert_matches(ndimage.generic_filter([[1, 5, 2], [7, 3, 8]], np.ptp, size=2),
                   sp.generic_filter([[1, 5, 2], [7, 3, 8]], np.ptp, size=2))
    x = np.array(2.5)
    assert_matches(ndimage.generic_filter(x, lambda w: w.sum() + len(w), size=3),
                   sp.generic_filter(x, lambda w: w.sum() + len(w), size=3))


def test_generic_filter_empty_footprint_and_array(rng):
    a = random_array(rng, (4, 5), "float64")
    footprint = np.zeros((3, 3), dtype=bool)
    assert_matches(ndimage.generic_filter(a, lambda w: len(w) + 1.0, footprint=footprint),
                   sp.generic_filter(a, lambda w: len(w) + 1.0, footprint=footprint))
    empty = np.zeros((0, 4))
    assert ndimage.generic_filter(empty, np.sum, size=3).shape == (0, 4)


def test_generic_filter_large_footprint_beyond_the_array(rng):
    a = random_array(rng, (3, 4), "float64")
    for mode in MODES:
        assert_matches(ndimage.generic_filter(a, window_stat, size=(7, 11), mode=mode),
                       sp.generic_filter(a, window_stat, size=(7, 11), mode=mode), err_msg=mode)


def test_generic_filter_window_is_a_fresh_float64_array(rng):
    kept = []

    def keep(x):
        assert x.dtype == np.float64 and x.ndim == 1
        kept.append(x)
        return 0.0
    a = random_array(rng, (3, 3), "uint8")
    ndimage.generic_filter(a, keep, size=2)
    assert len(kept) == 9 and all(len(x) == 4 for x in kept)
    assert len({id(x) for x in kept}) == 9


# ------------------------------------------------------- generic_filter1d

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_generic_filter1d_python_matches_scipy(rng, dtype, mode):
    a = random_array(rng, (5, 8), dtype)
    for axis, size, origin in [(-1, 3, 0), (0, 4, -2), (1, 5, 2), (0, 1, 0)]:
        expected = sp.generic_filter1d(a, line_stat, size, axis=axis, mode=mode, cval=2.5, origin=origin)
        actual = ndimage.generic_filter1d(a, line_stat, size, axis=axis, mode=mode, cval=2.5, origin=origin)
        assert actual.dtype == expected.dtype
        assert_matches(actual, expected, err_msg=f"{axis} {size} {origin}")


@needs_numba
@pytest.mark.parametrize("dtype", ["uint8", "int16", "int64", "float32", "float64"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["low_level_callable", "cfunc"])
def test_generic_filter1d_c_function_matches_scipy(rng, dtype, mode, kind):
    a = random_array(rng, (4, 21, 6), dtype)
    function = low_level(c_line_stat) if kind == "low_level_callable" else c_line_stat
    for axis, size, origin in [(1, 5, 1), (0, 9, -4), (2, 2, 0)]:
        expected = sp.generic_filter1d(a, low_level(c_line_stat), size, axis=axis, mode=mode, cval=-1.0,
                                       origin=origin)
        actual = ndimage.generic_filter1d(a, function, size, axis=axis, mode=mode, cval=-1.0, origin=origin,
                                          threads=2)
        assert_matches(actual, expected, err_msg=f"{axis} {size} {origin}")


@pytest.mark.parametrize("layout", ["F", "strided", "negative"])
def test_generic_filter1d_layouts_and_outputs(rng, layout):
    base = random_array(rng, (10, 12), "float64")
    a = {"F": np.asfortranarray(base), "strided": base[1::2, ::3], "negative": base[::-1, ::-1]}[layout]
    expected = sp.generic_filter1d(a, line_stat, 3, axis=0, output=np.float32)
    out = np.zeros(a.shape, np.float32)[::1]
    assert ndimage.generic_filter1d(a, line_stat, 3, axis=0, output=out) is out
    assert_matches(out, expected)
    assert_matches(ndimage.generic_filter1d(a, line_stat, 3, axis=0, output="float32"), expected)


def test_generic_filter1d_extra_arguments_and_in_place(rng):
    a = random_array(rng, (6, 7), "float64")

    def shifted(line_in, line_out, shift, scale=1.0):
        line_out[:] = (line_in[1:] + shift) * scale
    kwargs = dict(extra_arguments=(2.0,), extra_keywords={"scale": -3.0})
    expected = sp.generic_filter1d(a, shifted, 2, **kwargs)
    assert ndimage.generic_filter1d(a, shifted, 2, output=a, **kwargs) is a
    assert_matches(a, expected)


# ------------------------------------------------------------------ errors

def unchanged(*arrays):
    copies = [x.copy() for x in arrays]

    def check():
        for x, c in zip(arrays, copies):
            np.testing.assert_array_equal(x, c)
    return check


# scipy 1.17 goes on calling a Python function that raised, with the error
# set, and raises SystemError at the end: gpufilt stops and raises the
# function's own exception (that case is left out of the scipy comparison).
@pytest.mark.parametrize("call, error", [
    (lambda a, o: ndimage.generic_filter(a, lambda x: None, size=3, output=o), TypeError),
    (lambda a, o: ndimage.generic_filter(a, lambda x: "1.5", size=3, output=o), TypeError),
    (lambda a, o: ndimage.generic_filter(a, lambda x: np.array([1.0]), size=3, output=o), TypeError),
    (lambda a, o: ndimage.generic_filter(a, 5, size=3, output=o), ValueError),
    (lambda a, o: ndimage.generic_filter(a, np.sum, output=o), RuntimeError),
    (lambda a, o: ndimage.generic_filter(a, np.sum, size=0, output=o), RuntimeError),
    (lambda a, o: ndimage.generic_filter(a, np.sum, size=3, origin=2, output=o), ValueError),
    (lambda a, o: ndimage.generic_filter(a, np.sum, size=3, origin=0.5, output=o), TypeError),
    (lambda a, o: ndimage.generic_filter(a, np.sum, size=3, mode="bogus", output=o), RuntimeError),
    (lambda a, o: ndimage.generic_filter(a, np.sum, size=3, cval=1j, output=o), TypeError),
    (lambda a, o: ndimage.generic_filter(a, np.sum, size=3, extra_arguments=[1], output=o), RuntimeError),
    (lambda a, o: ndimage.generic_filter(a, np.sum, size=3, extra_keywords=[("a", 1)], output=o), RuntimeError),
    (lambda a, o: ndimage.generic_filter(a, np.sum, footprint=np.ones((3, 3, 3)), output=o), RuntimeError),
    (lambda a, o: ndimage.generic_filter(a, np.sum, size=3, output=o[:2]), RuntimeError),
    (lambda a, o: ndimage.generic_filter(a, np.sum, size=3, output=np.complex128), RuntimeError),
    (lambda a, o: ndimage.generic_filter(a + 1j, np.sum, size=3, output=o), TypeError),
    (lambda a, o: ndimage.generic_filter1d(a, lambda i, q: 1 / 0, 3, output=o), ZeroDivisionError),
    (lambda a, o: ndimage.generic_filter1d(a, np.sum, 0, output=o), RuntimeError),
    (lambda a, o: ndimage.generic_filter1d(a, np.sum, 3, origin=2, output=o), ValueError),
    (lambda a, o: ndimage.generic_filter1d(a, np.sum, 3, axis=2, output=o), np.exceptions.AxisError),
    (lambda a, o: ndimage.generic_filter1d(a, np.sum, 3.0, output=o), TypeError),
    (lambda a, o: ndimage.generic_filter1d(a, np.sum, 3, extra_arguments="ab", output=o), RuntimeError),
])
def test_errors_as_scipy_and_data_untouched(rng, call, error):
    _check_error(rng, call, error, compare_with_scipy=True)


def test_python_exception_stops_the_filter(rng):
    calls = []

    def fails_midway(x):
        calls.append(1)
        if x[4] > 0.5:
            raise ZeroDivisionError("midway")
        return 1.0
    _check_error(rng, lambda a, o: ndimage.generic_filter(a, fails_midway, size=3, output=o), ZeroDivisionError,
                 compare_with_scipy=False)
    assert len(calls) < 30


def _check_error(rng, call, error, compare_with_scipy):
    a = rng.random((5, 6))
    o = np.full(a.shape, 3.0)
    check = unchanged(a, o)
    with pytest.raises(error):
        call(a, o)
    check()
    if compare_with_scipy:
        with pytest.raises(error):  # scipy raises the same type
            _scipy_of(call)(a.copy(), o.copy())


def _scipy_of(call):
    """The same call with scipy.ndimage in place of gpufilt's."""
    def run(a, o):
        globals_ = dict(call.__globals__, ndimage=sp)
        return type(call)(call.__code__, globals_)(a, o)
    return run


@needs_numba
def test_c_function_failure_raises_runtime_error_and_leaves_output(rng):
    a = rng.random((40, 50))
    o = np.full(a.shape, 3.0)
    for threads in (1, 2):
        with pytest.raises(RuntimeError, match="unknown error in filter function"):
            ndimage.generic_filter(a, c_fails, size=3, output=o, threads=threads)
        with pytest.raises(RuntimeError, match="unknown error in line processing function"):
            ndimage.generic_filter1d(a, low_level(c_line_fails), 3, output=o, threads=threads)
    np.testing.assert_array_equal(o, 3.0)
    with pytest.raises(RuntimeError, match="unknown error in filter function"):
        sp.generic_filter(a, low_level(c_fails), size=3)


@pytest.mark.parametrize("threads", [1, 2])
def test_low_level_callable_with_user_data_and_a_ctypes_callback(rng, threads):
    """A ctypes callback (it takes the GIL itself: no deadlock with the GIL
    released), and user_data passed through as the void pointer."""
    import ctypes
    window = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_long,
                              ctypes.POINTER(ctypes.c_double), ctypes.c_void_p)

    def scaled_max(values, n, result, user_data):
        result[0] = max(values[i] for i in range(n)) * ctypes.cast(user_data, ctypes.POINTER(ctypes.c_double))[0]
        return 1
    callback = window(scaled_max)
    factor = ctypes.c_double(2.5)
    function = scipy.LowLevelCallable(callback, ctypes.cast(ctypes.pointer(factor), ctypes.c_void_p))
    a = rng.random((90, 70))
    np.testing.assert_array_equal(ndimage.generic_filter(a, function, size=(3, 2), threads=threads),
                                  sp.generic_filter(a, function, size=(3, 2)))


def test_low_level_callable_runs_on_the_calling_thread_unless_threads_asks(rng):
    """scipy lets a LowLevelCallable call Python's C API (set an error when it
    fails), which needs the GIL: by default it runs as scipy runs it, on the
    calling thread with the GIL held; threads= opts in to more."""
    import ctypes
    import threading
    window = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_long,
                              ctypes.POINTER(ctypes.c_double), ctypes.c_void_p)
    seen = set()

    def first(values, n, result, user_data):
        seen.add(threading.get_ident())
        result[0] = values[0]
        return 1
    callback = window(first)
    function = scipy.LowLevelCallable(callback)
    a = rng.random((300, 400))
    np.testing.assert_array_equal(ndimage.generic_filter(a, function, size=2),
                                  sp.generic_filter(a, function, size=2))
    assert seen == {threading.get_ident()}


@needs_numba
def test_low_level_callable_of_the_wrong_signature(rng):
    a = rng.random((5, 6))
    for module in (ndimage, sp):
        with pytest.raises(ValueError, match="Invalid scipy.LowLevelCallable signature"):
            module.generic_filter1d(a, low_level(c_window_stat), 3)
        with pytest.raises(ValueError, match="Invalid scipy.LowLevelCallable signature"):
            module.generic_filter(a, low_level(c_line_stat), size=3)


@needs_numba
def test_gpu_functions_refused_on_the_cpu(rng):
    from numba import cuda

    @cuda.jit(device=True)
    def device_sum(values):
        return values[0]
    with pytest.raises(TypeError, match="runs on the GPU"):
        ndimage.generic_filter(rng.random((4, 5)), device_sum, size=3)


def test_size_and_footprint_warns(rng):
    a = rng.random((4, 4))
    with pytest.warns(UserWarning, match="ignoring size because footprint is set"):
        ndimage.generic_filter(a, np.sum, size=3, footprint=np.ones((2, 2)))


# ------------------------------------------------------- vectorized_filter

@needs_vectorized
@pytest.mark.parametrize("mode", MODES + ["valid"])
def test_vectorized_filter_matches_scipy(rng, mode):
    a = random_array(rng, (9, 10), "float32")
    cval = 1.25 if mode in ("constant", "grid-constant") else None
    for kwargs in [dict(size=3), dict(size=(2, 4), axes=(1, 0)), dict(footprint=rng.random((3, 2)) < 0.7),
                   dict(size=3, axes=1, origin=None if mode == "valid" else 1)]:
        expected = sp.vectorized_filter(a, np.median, mode=mode, cval=cval, **kwargs)
        actual = ndimage.vectorized_filter(a, np.median, mode=mode, cval=cval, **kwargs)
        assert actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected, err_msg=str(kwargs))


@needs_vectorized
def test_vectorized_filter_batches_and_output(rng):
    a = random_array(rng, (40, 30), "float64")
    expected = sp.vectorized_filter(a, np.std, size=(3, 5), batch_memory=4096)
    np.testing.assert_array_equal(ndimage.vectorized_filter(a, np.std, size=(3, 5), batch_memory=4096), expected)
    out = np.empty_like(a)
    assert ndimage.vectorized_filter(a, np.std, size=(3, 5), output=out, batch_memory=4096) is out
    np.testing.assert_array_equal(out, expected)
    with pytest.raises(ValueError, match="batch_memory"):
        ndimage.vectorized_filter(a, np.std, size=(3, 5), batch_memory=8)


@needs_vectorized
def test_vectorized_filter_float16_complex_and_several_values(rng):
    h = random_array(rng, (6, 7), "float16")
    np.testing.assert_array_equal(ndimage.vectorized_filter(h, np.nanmedian, size=3),
                                  sp.vectorized_filter(h, np.nanmedian, size=3))
    c = random_array(rng, (6, 7), "complex64")
    np.testing.assert_array_equal(ndimage.vectorized_filter(c, np.mean, size=2),
                                  sp.vectorized_filter(c, np.mean, size=2))

    def quartiles(x, axis):
        return np.quantile(x, [0.25, 0.75], axis=axis)
    np.testing.assert_array_equal(ndimage.vectorized_filter(h, quartiles, size=3, batch_memory=np.inf),
                                  sp.vectorized_filter(h, quartiles, size=3, batch_memory=np.inf))


@needs_vectorized
@pytest.mark.parametrize("kwargs", [
    dict(function=5, size=3), dict(function=np.sum), dict(function=np.sum, size=3, footprint=np.ones((3, 3))),
    dict(function=np.sum, size=(3, 3, 3)), dict(function=np.sum, size=0), dict(function=np.sum, size=2.5),
    dict(function=np.sum, size=3, origin=0.5), dict(function=np.sum, size=3, origin=(1, 1, 1)),
    dict(function=np.sum, size=3, mode="bogus"), dict(function=np.sum, size=3, mode="valid", origin=1),
    dict(function=np.sum, size=3, cval=1.0), dict(function=np.sum, size=3, batch_memory=-1),
    dict(function=np.sum, size=3, axes=(0, 1, 2)),
])
def test_vectorized_filter_errors_as_scipy(rng, kwargs):
    a = rng.random((5, 6))
    with pytest.raises(ValueError) as ours:
        ndimage.vectorized_filter(a, **kwargs)
    with pytest.raises(ValueError) as theirs:
        sp.vectorized_filter(a, **kwargs)
    assert str(ours.value).split("{")[0] == str(theirs.value).split("{")[0]


def test_not_in_the_missing_list():
    for name in ("generic_filter", "generic_filter1d", "vectorized_filter"):
        assert name in ndimage.__all__
        assert callable(getattr(ndimage, name))


# -------------------------------------------------------------------- dask

@needs_vectorized
@pytest.mark.parametrize("mode", ["reflect", "wrap", "constant", "mirror"])
def test_dask_arrays_with_the_halo_of_the_window(rng, mode):
    da = pytest.importorskip("dask.array")
    a = random_array(rng, (23, 31), "float64")
    x = da.from_array(a, chunks=(5, 7))
    kwargs = dict(size=(3, 4), origin=(1, -1), mode=mode)
    assert_matches(ndimage.generic_filter(x, window_stat, **kwargs).compute(),
                   sp.generic_filter(a, window_stat, **kwargs))
    kwargs = dict(axis=0, origin=1, mode=mode)
    assert_matches(ndimage.generic_filter1d(x, line_stat, 4, **kwargs).compute(),
                   sp.generic_filter1d(a, line_stat, 4, **kwargs))
    cval = 1.0 if mode == "constant" else None
    np.testing.assert_array_equal(ndimage.vectorized_filter(x, np.median, size=(5, 3), mode=mode, cval=cval).compute(),
                                  sp.vectorized_filter(a, np.median, size=(5, 3), mode=mode, cval=cval))
    with pytest.raises(ValueError, match="valid"):
        ndimage.vectorized_filter(x, np.median, size=3, mode="valid")


def test_line_function_that_resizes_output_line_reads_no_freed_memory():
    # numpy's resize(refcheck=False) reallocates the line: a shrunk one keeps
    # its first values in place; a grown one moves, unless the allocator
    # extends it where it is (which depends on the heap: CI's CPU-wheel run
    # once grew every line in place). gpufilt takes what stayed and leaves
    # the rest as given (zeros); scipy 1.17 reads freed memory there (values
    # like 1e-320).
    def shrink(line_in, line_out):
        line_out.resize(1, refcheck=False)
        line_out[:] = 1

    def grow(line_in, line_out):
        line_out.resize(100000, refcheck=False)
        line_out[:] = 1
    x = np.arange(2000.0).reshape(4, 500)
    got = ndimage.generic_filter1d(x, shrink, 3)
    assert (got[:, 0] == 1).all() and (got[:, 1:] == 0).all()
    grown = ndimage.generic_filter1d(x, grow, 3)
    for line in grown:  # all moved (zeros) or all kept in place (ones)
        assert (line == 0).all() or (line == 1).all(), line


def test_c_function_that_sets_an_error_but_returns_1_raises_it(tmp_path):
    # scipy raises an error the function set, whatever it returned.
    import shutil
    import subprocess
    import sysconfig
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    source = tmp_path / "sets_error.c"
    source.write_text('#include <Python.h>\n#include <stdint.h>\n'
                      'int f(double *b, intptr_t n, double *r, void *u) {\n'
                      '  PyErr_SetString(PyExc_ZeroDivisionError, "set, then 1 returned"); *r = 2; return 1; }\n')
    library = tmp_path / "sets_error.so"
    built = subprocess.run([compiler, "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(source),
                            "-o", str(library)], capture_output=True, text=True)
    if built.returncode != 0:
        pytest.skip(f"could not build the C function: {built.stderr[-200:]}")
    import ctypes
    f = ctypes.CDLL(str(library)).f
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.c_long, ctypes.POINTER(ctypes.c_double), ctypes.c_void_p]
    a = np.ones((5, 6))
    for module in (sp, ndimage):
        with pytest.raises(ZeroDivisionError, match="set, then 1 returned"):
            module.generic_filter(a, scipy.LowLevelCallable(f), size=3)
