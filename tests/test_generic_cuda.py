"""generic_filter, generic_filter1d and vectorized_filter on cupy arrays:
cupy.RawKernel and cupy.ReductionKernel functions (as cupyx.scipy.ndimage
takes them) and numba CUDA device functions, with scipy on the host copy as
the oracle (the same function written for the CPU), and cupyx's own results
for cupyx's calls. Every test is marked `cuda` (skipped without a usable
device, see conftest.py)."""
from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from scipy import ndimage as sp

from gpufilt import ndimage

from _helpers import MODES, assert_matches, random_array
from test_generic import line_stat as line_mix, window_stat as weighted_mean

pytestmark = pytest.mark.cuda

cupy = pytest.importorskip("cupy")

# generic_filter's RawKernel, as cupyx's documentation writes them: a weighted
# mean of the window, weights 1..n (the order of the values counts).
RAW_WINDOW = cupy.RawKernel(r"""
extern "C" __global__ void weighted_mean(const double* x, int n, double* out) {
    double total = 0.0, weights = 0.0;
    for (int i = 0; i < n; ++i) { total += x[i] * (i + 1); weights += i + 1; }
    *out = n ? total / weights : 0.0;
}""", "weighted_mean")

RAW_LINE = cupy.RawKernel(r"""
extern "C" __global__ void line_mix(const double* in, long long in_length, double* out, long long out_length) {
    long long k = in_length - out_length + 1;
    for (long long i = 0; i < out_length; ++i) {
        double low = in[i];
        for (long long j = 0; j < k; ++j) low = min(low, in[i + j]);
        out[i] = 0.25 * in[i + k - 1] + 0.25 * in[i] + 0.5 * low;
    }
}""", "line_mix")

SUM_OF_SQUARES = cupy.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "sum_of_squares")
MAXIMUM = cupy.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", "0", "window_max")


def check(actual, expected):
    assert type(actual) is cupy.ndarray
    assert actual.dtype == expected.dtype
    assert_matches(cupy.asnumpy(actual), expected)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "int32", "float32", "float64", "bool"])
@pytest.mark.parametrize("mode", MODES)
def test_raw_kernel_matches_scipy(rng, dtype, mode):
    host = random_array(rng, (13, 17), dtype)
    footprint = np.array([[1, 0, 1], [0, 1, 1]], dtype=bool)
    kwargs = dict(footprint=footprint, mode=mode, cval=1.5, origin=(0, -1))
    x = cupy.asarray(host)
    check(ndimage.generic_filter(x, RAW_WINDOW, **kwargs), sp.generic_filter(host, weighted_mean, **kwargs))
    np.testing.assert_array_equal(cupy.asnumpy(x), host)


@pytest.mark.parametrize("axes", [None, (0, 2), 1])
def test_raw_kernel_axes_layouts_outputs(rng, axes):
    host = random_array(rng, (9, 8, 10), "float32")
    x = cupy.asfortranarray(cupy.asarray(host))[::2, :, ::-1]
    h = host[::2, :, ::-1]
    n = 3 if axes is None else len(np.atleast_1d(axes))
    kwargs = dict(size=(3, 2, 4)[:n], axes=axes, mode="mirror")
    check(ndimage.generic_filter(x, RAW_WINDOW, **kwargs), sp.generic_filter(h, weighted_mean, **kwargs))
    out = cupy.zeros(x.shape, np.float64)
    assert ndimage.generic_filter(x, RAW_WINDOW, output=out, **kwargs) is out
    check(out, sp.generic_filter(h, weighted_mean, output=np.float64, **kwargs))
    check(ndimage.generic_filter(x, RAW_WINDOW, output="int16", **kwargs),
          sp.generic_filter(h, weighted_mean, output=np.int16, **kwargs))


def test_raw_kernel_in_place_and_on_a_stream(rng):
    host = random_array(rng, (64, 70), "float64")
    x = cupy.asarray(host)
    stream = cupy.cuda.Stream(non_blocking=True)
    assert ndimage.generic_filter(x, RAW_WINDOW, size=3, output=x, stream=stream) is x
    stream.synchronize()
    assert_matches(cupy.asnumpy(x), sp.generic_filter(host, weighted_mean, size=3))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["reflect", "constant", "wrap"])
def test_reduction_kernel_matches_scipy(rng, dtype, mode):
    host = random_array(rng, (11, 12), dtype)
    x = cupy.asarray(host)
    kwargs = dict(size=(3, 2), mode=mode, cval=2.0)
    check(ndimage.generic_filter(x, SUM_OF_SQUARES, **kwargs),
          sp.generic_filter(host.astype(np.float64), lambda w: (w * w).sum(), output=dtype, **kwargs))


@pytest.mark.parametrize("dtype", ["uint8", "uint16"])  # (MAXIMUM's identity, 0, is their least value)
def test_reduction_kernel_on_integers(rng, dtype):
    host = random_array(rng, (11, 12), dtype)
    footprint = rng.random((3, 3)) < 0.6
    check(ndimage.generic_filter(cupy.asarray(host), MAXIMUM, footprint=footprint, mode="nearest"),
          sp.generic_filter(host, np.max, footprint=footprint, mode="nearest"))


def test_cupyx_calls_run_unchanged(rng):
    cupyx_ndimage = pytest.importorskip("cupyx.scipy.ndimage")
    x = cupy.asarray(random_array(rng, (20, 21), "float32"))
    for kwargs in [dict(size=3), dict(footprint=np.array([[1, 1, 0], [0, 1, 1]])), dict(size=(2, 5), origin=(-1, 2))]:
        for function in (RAW_WINDOW, SUM_OF_SQUARES):
            want = cupyx_ndimage.generic_filter(x, function, mode="reflect", **kwargs)
            got = ndimage.generic_filter(x, function, mode="reflect", **kwargs)
            assert got.dtype == want.dtype
            assert_matches(cupy.asnumpy(got), cupy.asnumpy(want))
    want = cupyx_ndimage.generic_filter1d(x, RAW_LINE, 5, axis=0, mode="nearest")
    assert_matches(cupy.asnumpy(ndimage.generic_filter1d(x, RAW_LINE, 5, axis=0, mode="nearest")),
                   cupy.asnumpy(want))


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float32", "float64"])
@pytest.mark.parametrize("mode", MODES)
def test_generic_filter1d_raw_kernel_matches_scipy(rng, dtype, mode):
    host = random_array(rng, (6, 9, 5), dtype)
    x = cupy.asarray(host)
    for axis, size, origin in [(1, 3, 0), (0, 4, -2), (2, 5, 2), (-1, 1, 0)]:
        kwargs = dict(axis=axis, mode=mode, cval=-1.0, origin=origin)
        check(ndimage.generic_filter1d(x, RAW_LINE, size, **kwargs),
              sp.generic_filter1d(host, line_mix, size, **kwargs))


# ------------------------------------------------------------------- numba

def numba_cuda_compiles(cuda):
    """None, or why numba-cuda cannot compile a kernel in this environment:
    numba-cuda 0.x imports numpy.row_stack, which numpy 2.5 removed, so on
    the GPU machine (numpy 2.5) it failed on every kernel; with numpy 2.4 these
    tests passed there."""
    @cuda.jit
    def probe(out):
        out[0] = 1.0
    try:
        with warnings.catch_warnings():  # a one-block launch warns of low occupancy (as in _generic_cuda)
            warnings.filterwarnings("ignore", message=".*under-utilization due to low occupancy")
            probe[1, 1](cupy.zeros(1))
    except (AttributeError, ImportError) as error:
        return f"numba-cuda cannot compile a kernel here: {type(error).__name__}: {error}"
    return None


@functools.lru_cache(maxsize=None)  # one compilation of each for all the tests
def numba_functions():
    cuda = pytest.importorskip("numba.cuda")
    broken = numba_cuda_compiles(cuda)
    if broken:
        pytest.skip(broken)

    @cuda.jit(device=True)
    def nb_weighted_mean(values, scale):
        total = 0.0
        weights = 0.0
        for i in range(len(values)):
            total += values[i] * (i + 1)
            weights += i + 1
        return scale * total / weights if len(values) else 0.0

    @cuda.jit(device=True)
    def nb_line_mix(line_in, line_out):
        k = len(line_in) - len(line_out) + 1
        for i in range(len(line_out)):
            low = line_in[i]
            for j in range(k):
                low = min(low, line_in[i + j])
            line_out[i] = 0.25 * line_in[i + k - 1] + 0.25 * line_in[i] + 0.5 * low
    return nb_weighted_mean, nb_line_mix


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
@pytest.mark.parametrize("mode", ["reflect", "constant", "mirror", "grid-wrap", "nearest"])
def test_numba_device_functions_match_scipy(rng, dtype, mode):
    nb_weighted_mean, nb_line_mix = numba_functions()
    host = random_array(rng, (10, 7, 6), dtype)
    x = cupy.asarray(host)
    footprint = rng.random((3, 2, 3)) < 0.6
    kwargs = dict(footprint=footprint, mode=mode, cval=0.5, origin=(1, 0, -1))
    check(ndimage.generic_filter(x, nb_weighted_mean, extra_arguments=(0.5,), **kwargs),
          sp.generic_filter(host, lambda w: 0.5 * weighted_mean(w), **kwargs))
    for axis, size, origin in [(0, 3, 1), (2, 4, 0)]:
        kw = dict(axis=axis, mode=mode, cval=0.5, origin=origin)
        check(ndimage.generic_filter1d(x, nb_line_mix, size, **kw), sp.generic_filter1d(host, line_mix, size, **kw))


# ------------------------------------------------------------------ errors

def test_host_functions_refused_with_a_type_error(rng):
    import scipy
    x = cupy.asarray(rng.random((5, 6)))
    before = x.copy()
    with pytest.raises(TypeError, match="function"):
        ndimage.generic_filter(x, np.sum, size=3)
    with pytest.raises(TypeError, match="function"):
        ndimage.generic_filter1d(x, line_mix, 3)
    numba = pytest.importorskip("numba")
    from numba import types

    @numba.cfunc(types.intc(types.CPointer(types.float64), types.intp, types.CPointer(types.float64), types.voidptr))
    def c_sum(values, n, result, user_data):
        result[0] = 0.0
        return 1
    with pytest.raises(TypeError, match="function"):
        ndimage.generic_filter(x, scipy.LowLevelCallable(c_sum.ctypes), size=3)
    with pytest.raises(TypeError, match="ElementwiseKernel"):
        ndimage.generic_filter(x, cupy.ElementwiseKernel("T x", "T y", "y = x", "copy"), size=3)
    with pytest.raises(TypeError, match="ReductionKernel"):
        ndimage.generic_filter1d(x, SUM_OF_SQUARES, 3)
    with pytest.raises(TypeError, match="runs on the GPU"):  # and the CPU refuses GPU functions
        ndimage.generic_filter(cupy.asnumpy(x), RAW_WINDOW, size=3)
    cupy.testing.assert_array_equal(x, before)


# ------------------------------------------------------- vectorized_filter

@pytest.mark.parametrize("mode", ["reflect", "constant", "wrap", "valid"])
def test_vectorized_filter_on_cupy(rng, mode):
    host = random_array(rng, (20, 21), "float32")
    x = cupy.asarray(host)
    cval = 1.0 if mode == "constant" else None
    for kwargs in [dict(size=3), dict(footprint=rng.random((3, 2)) < 0.7), dict(size=(2, 4), axes=(1, 0))]:
        got = ndimage.vectorized_filter(x, cupy.mean, mode=mode, cval=cval, **kwargs)
        assert type(got) is cupy.ndarray
        want = sp.vectorized_filter(host, np.mean, mode=mode, cval=cval, **kwargs)
        assert_matches(cupy.asnumpy(got), want)
    out = cupy.empty_like(x)
    assert ndimage.vectorized_filter(x, cupy.max, size=3, output=out, batch_memory=4096) is out
    np.testing.assert_array_equal(cupy.asnumpy(out), sp.vectorized_filter(host, np.max, size=3))


def test_empty_and_0d_cupy_arrays():
    empty = cupy.zeros((0, 4))
    assert ndimage.generic_filter(empty, RAW_WINDOW, size=3).shape == (0, 4)
    assert ndimage.generic_filter1d(empty, RAW_LINE, 3).shape == (0, 4)
    scalar = cupy.asarray(2.5)
    got = ndimage.generic_filter(scalar, RAW_WINDOW, size=3)
    assert got.shape == () and float(got) == sp.generic_filter(np.asarray(2.5), weighted_mean, size=3)


def test_raw_kernel_footprint_beyond_constant_memory(rng):
    host = random_array(rng, (40, 50), "float32")
    kwargs = dict(size=(71, 70), mode="wrap")  # 4970 cells of 2 offsets: global memory, not constant
    check(ndimage.generic_filter(cupy.asarray(host), RAW_WINDOW, **kwargs),
          sp.generic_filter(host, weighted_mean, **kwargs))


@pytest.mark.parametrize("mode", ["wrap", "grid-wrap"])
def test_windows_longer_than_the_array_wrap_around_it(rng, mode):
    # The input is padded past its own length: cupy.pad's 'wrap' repeats the
    # wrong elements there (cupy 14.2), gpufilt takes them by index.
    host = random_array(rng, (3, 4), "float64")
    x = cupy.asarray(host)
    kwargs = dict(size=(9, 11), mode=mode, origin=(3, -4))  # 7 before an axis of 3, 9 after one of 4
    check(ndimage.generic_filter(x, RAW_WINDOW, **kwargs), sp.generic_filter(host, weighted_mean, **kwargs))
    line = dict(mode=mode, origin=-4)
    check(ndimage.generic_filter1d(x, RAW_LINE, 11, **line), sp.generic_filter1d(host, line_mix, 11, **line))
    check(ndimage.vectorized_filter(x, cupy.mean, **kwargs), sp.vectorized_filter(host, np.mean, **kwargs))
