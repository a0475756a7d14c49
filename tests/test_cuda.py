"""The filters on CUDA arrays: cupy (every dtype, mode, layout and output
form), torch CUDA tensors, numba device arrays (CAI only), jax GPU arrays;
streams (current, explicit, a CAI producer's), CUDA graph capture, devices.

Every test is marked `cuda` (skipped without a usable device, see
conftest.py). scipy on the host is the oracle; results come back to the host
with cupy.asnumpy (or the library's own copy) in the test only.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import gpufilt
from gpufilt import ndimage as gnd

from _helpers import (ALL_DTYPES, MODES, assert_matches, random_array, scipy_reference,
                      weights_for)

pytestmark = pytest.mark.cuda

cupy = pytest.importorskip("cupy")

FUNCTIONS = ["correlate1d", "convolve1d", "gaussian_filter1d", "gaussian_filter",
             "uniform_filter1d", "uniform_filter"]


def filter_args(name, rng, dtype, ndim):
    """Ordinary arguments of filter `name` (1-D filters along axis 0)."""
    if name in ("correlate1d", "convolve1d"):
        return (weights_for(rng, dtype, 5),), {"axis": 0}
    if name == "gaussian_filter1d":
        return (1.3,), {"axis": 0}
    if name == "gaussian_filter":
        return ([1.0, 0.7, 1.6, 0.5, 1.2][:ndim],), {}
    if name == "uniform_filter1d":
        return (4,), {"axis": 0}
    if name == "uniform_filter":
        return ([3, 4, 2, 5, 3][:ndim],), {}
    raise AssertionError(name)


def check_cupy(name, x, *args, **kwargs):
    """gpufilt's `name` on cupy array x against scipy on its host copy: the
    result is a new cupy array on x's device with scipy's dtype and values,
    and x is untouched."""
    host = cupy.asnumpy(x)
    got = getattr(gnd, name)(x, *args, **kwargs)
    assert type(got) is cupy.ndarray
    assert got.device.id == x.device.id
    want = scipy_reference(name, host, *args, **kwargs)
    assert got.dtype == want.dtype
    assert_matches(cupy.asnumpy(got), want)
    np.testing.assert_array_equal(cupy.asnumpy(x), host, err_msg="the input was modified")
    return got


def device_array(rng, shape, dtype):
    return cupy.asarray(random_array(rng, shape, dtype))


# ------------------------------------------------------------ cupy parity


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_dtype_matches_scipy(name, dtype, rng):
    x = device_array(rng, (37, 45), dtype)  # not a multiple of any tile size
    args, kwargs = filter_args(name, rng, dtype, x.ndim)
    check_cupy(name, x, *args, **kwargs)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_three_dimensional_matches_scipy(name, dtype, rng):
    x = device_array(rng, (9, 17, 33), dtype)
    args, kwargs = filter_args(name, rng, dtype, x.ndim)
    check_cupy(name, x, *args, **kwargs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_mode_matches_scipy(name, mode, rng):
    x = device_array(rng, (21, 34), np.float64)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    check_cupy(name, x, *args, mode=mode, cval=-1.25, **kwargs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("name,args", [
    ("uniform_filter1d", (7,)),
    ("gaussian_filter1d", (2.0,)),
    ("correlate1d", ([0.5, -1.0, 2.0, 0.25, 1.5, -0.75],)),
])
@pytest.mark.parametrize("axis", [0, -1])
def test_cupy_line_shorter_than_filter_matches_scipy(name, args, axis, n, mode, rng):
    shape = (n, 5) if axis == 0 else (5, n)
    x = device_array(rng, shape, np.float32)
    check_cupy(name, x, *args, axis=axis, mode=mode, cval=1.5)


@pytest.mark.parametrize("size,origin", [(1, 0), (2, -1), (2, 0), (3, -1), (3, 1), (4, -2), (4, 1),
                                         (7, -3), (7, 3)])
@pytest.mark.parametrize("axis", [0, 1])
def test_cupy_uniform_filter1d_origin_matches_scipy(size, origin, axis, rng):
    x = device_array(rng, (12, 19), np.float64)
    check_cupy("uniform_filter1d", x, size, axis=axis, origin=origin, mode="constant", cval=0.5)


@pytest.mark.parametrize("taps,origin", [(1, 0), (2, -1), (4, 1), (5, -2), (5, 2), (6, -3)])
@pytest.mark.parametrize("name", ["correlate1d", "convolve1d"])
def test_cupy_weights_origin_matches_scipy(name, taps, origin, rng):
    x = device_array(rng, (11, 13), np.float32)
    check_cupy(name, x, rng.standard_normal(taps), origin=origin, mode="mirror")


@pytest.mark.parametrize("taps", [1, 17, 64, 129, 300])
def test_cupy_long_weights_match_scipy(taps, rng):
    x = device_array(rng, (6, 400), np.float64)
    check_cupy("correlate1d", x, rng.standard_normal(taps), mode="wrap")


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
@pytest.mark.parametrize("order", [0, 1, 2, 3])
def test_cupy_gaussian_order_matches_scipy(order, dtype, rng):
    x = device_array(rng, (15, 23), dtype)
    check_cupy("gaussian_filter1d", x, 1.7, order=order, axis=0)
    check_cupy("gaussian_filter", x, (1.2, 0.8), order=(order, 3 - order))


@pytest.mark.parametrize("sigma,truncate,radius", [(0.3, 4.0, None), (2.5, 1.0, None),
                                                   (8.0, 4.0, None), (1.0, 4.0, 0), (1.5, 4.0, 9)])
def test_cupy_gaussian_truncate_and_radius_match_scipy(sigma, truncate, radius, rng):
    x = device_array(rng, (19, 40), np.float32)
    check_cupy("gaussian_filter", x, sigma, truncate=truncate, radius=radius)


@pytest.mark.parametrize("axes", [None, (0,), (2,), (0, 2), (-1, -3), [1]])
@pytest.mark.parametrize("name", ["gaussian_filter", "uniform_filter"])
def test_cupy_axes_match_scipy(name, axes, rng):
    x = device_array(rng, (7, 8, 9), np.float64)
    n = 3 if axes is None else len(axes)
    arg = [1.0, 1.5, 0.8][:n] if name == "gaussian_filter" else [3, 2, 4][:n]
    check_cupy(name, x, arg, axes=axes, mode=["reflect", "wrap", "constant"][:n], cval=2.0)


@pytest.mark.parametrize("shape", [(50,), (7, 8), (4, 5, 6), (3, 4, 5, 3), (2, 3, 4, 3, 4)])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_number_of_dimensions_matches_scipy(name, shape, rng):
    x = device_array(rng, shape, np.float32)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    if "axis" in kwargs:
        kwargs["axis"] = -1
    check_cupy(name, x, *args, **kwargs)


def _cupy_views(rng, dtype):
    base = device_array(rng, (24, 31, 6), dtype)
    return {
        "F": cupy.asfortranarray(base),
        "strided": base[1::2, ::3, 1::2],
        "negative": base[::-1, :, ::-1],
        "negative-strided": base[::-2, 3::-1],
        "transposed": base.transpose(2, 0, 1),
    }


CUPY_VIEWS = ["F", "strided", "negative", "negative-strided", "transposed"]


@pytest.mark.parametrize("view", CUPY_VIEWS)
@pytest.mark.parametrize("dtype", ["uint8", "float32", "complex64"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_view_input_matches_scipy(name, dtype, view, rng):
    x = _cupy_views(rng, dtype)[view]
    args, kwargs = filter_args(name, rng, dtype, x.ndim)
    check_cupy(name, x, *args, **kwargs)


@pytest.mark.parametrize("view", CUPY_VIEWS)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_view_output_is_written_and_returned(name, view, rng):
    out = _cupy_views(rng, np.float64)[view]
    x = device_array(rng, out.shape, np.float32)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    assert getattr(gnd, name)(x, *args, output=out, **kwargs) is out
    expected = scipy_reference(name, cupy.asnumpy(x), *args, output=np.float64, **kwargs)
    assert_matches(cupy.asnumpy(out), expected)


@pytest.mark.parametrize("dtype", ["int32", "float32", "complex128"])
@pytest.mark.parametrize("name,args", [("gaussian_filter", (1.5,)), ("uniform_filter", (3,))])
def test_cupy_zero_dimensional_matches_scipy(name, args, dtype, rng):
    x = cupy.asarray(random_array(rng, (), dtype))
    assert check_cupy(name, x, *args).shape == ()


@pytest.mark.parametrize("shape", [(0,), (0, 5), (5, 0), (3, 0, 4)])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_empty_matches_scipy(name, shape, rng):
    x = cupy.empty(shape, cupy.float32)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    assert check_cupy(name, x, *args, **kwargs).shape == shape


# ---------------------------------------------------------- cupy outputs


@pytest.mark.parametrize("output", [np.float32, "float64", np.dtype("int32"), np.float16, "uint16"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_output_dtype_matches_scipy(name, output, rng):
    x = cupy.asarray(rng.random((13, 17)) * 200 + 1)
    args, kwargs = filter_args(name, rng, np.uint8, x.ndim)  # convex weights: fits every dtype
    got = check_cupy(name, x, *args, output=output, **kwargs)
    assert got.dtype == np.dtype(output)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_output_array_is_written_and_returned_itself(name, rng):
    x = device_array(rng, (13, 17), np.float32)
    out = cupy.full(x.shape, np.nan, cupy.float32)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    assert getattr(gnd, name)(x, *args, output=out, **kwargs) is out
    assert_matches(cupy.asnumpy(out), scipy_reference(name, cupy.asnumpy(x), *args, **kwargs))


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64", "complex64"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_in_place_matches_scipy_on_a_copy(name, dtype, rng):
    x = device_array(rng, (14, 19), dtype)
    args, kwargs = filter_args(name, rng, dtype, x.ndim)
    expected = scipy_reference(name, cupy.asnumpy(x), *args, **kwargs)
    assert getattr(gnd, name)(x, *args, output=x, **kwargs) is x
    assert_matches(cupy.asnumpy(x), expected)


def _overlapping_pairs(rng):
    flat = device_array(rng, (300,), np.float64)
    square = device_array(rng, (33, 33), np.float64)
    grid = device_array(rng, (20, 41), np.float64)
    return {
        "shifted-right": (flat[:290], flat[10:]),
        "shifted-left": (flat[10:], flat[:290]),
        "reversed": (flat, flat[::-1]),
        "transposed": (square, square.T),
        "rows-shifted": (grid[:-1], grid[1:]),
        "columns-shifted": (grid[:, 3:], grid[:, :-3]),
    }


@pytest.mark.parametrize("overlap", ["shifted-right", "shifted-left", "reversed", "transposed",
                                     "rows-shifted", "columns-shifted"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_overlapping_output_matches_scipy_on_a_copy(name, overlap, rng):
    x, out = _overlapping_pairs(rng)[overlap]
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    if "axis" in kwargs:
        kwargs["axis"] = -1
    expected = scipy_reference(name, cupy.asnumpy(x), *args, **kwargs)
    assert getattr(gnd, name)(x, *args, output=out, **kwargs) is out
    assert_matches(cupy.asnumpy(out), expected)


# ---------------------------------------------------------------- complex


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_complex_with_complex_cval_matches_scipy(name, dtype, rng):
    x = device_array(rng, (12, 15), dtype)
    args, kwargs = filter_args(name, rng, dtype, x.ndim)
    check_cupy(name, x, *args, mode="constant", cval=1.5 - 2.5j, **kwargs)


@pytest.mark.parametrize("dtype", ["float32", "complex64"])
@pytest.mark.parametrize("name", ["correlate1d", "convolve1d"])
def test_cupy_complex_weights_match_scipy(name, dtype, rng):
    x = device_array(rng, (12, 15), dtype)
    w = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    check_cupy(name, x, w, axis=0, mode="reflect")


def test_cupy_complex64_in_place_with_complex_weights(rng):
    x = device_array(rng, (12, 15), np.complex64)
    w = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    expected = scipy_reference("correlate1d", cupy.asnumpy(x), w)
    assert gnd.correlate1d(x, w, output=x) is x
    assert_matches(cupy.asnumpy(x), expected)


# ------------------------------------------------------------ integer data


@pytest.mark.parametrize("sigma", [0.5, 1.3, 3.0])
@pytest.mark.parametrize("ndim", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "int32", "uint64"])
def test_cupy_flat_integer_image_stays_within_one_unit_of_scipy(dtype, ndim, sigma):
    # As on the CPU: the taps must be summed in scipy's order for a flat
    # image to keep its value through truncation.
    x = cupy.full((9,) * ndim, 17, dtype)
    check_cupy("gaussian_filter", x, sigma)


# -------------------------------------------- 64-bit indexing (> 2**31 elements)


def _big_uint8(n_rows, n_cols, rng):
    """A random-looking uint8 array of more than 2**31 elements, built on the
    device from a host block (no 2**31-element host array)."""
    free, _total = cupy.cuda.Device().mem_info
    if free < 8 * n_rows * n_cols:
        pytest.skip(f"needs {8 * n_rows * n_cols / 2 ** 30:.1f} GiB of free device memory")
    block = cupy.asarray(rng.integers(0, 256, 2 ** 24, dtype=np.uint8))
    x = cupy.empty(n_rows * n_cols, cupy.uint8)
    for k, start in enumerate(range(0, x.size, block.size)):
        stop = min(start + block.size, x.size)
        x[start:stop] = block[: stop - start] + cupy.uint8(k % 251)
    return x.reshape(n_rows, n_cols) if n_cols > 1 else x


def test_cupy_line_longer_than_2_to_31_elements_matches_scipy(rng):
    n = 2 ** 31 + 1000
    x = _big_uint8(n, 1, rng)
    y = gnd.uniform_filter1d(x, 5)
    for lo, hi in [(0, 2000), (2 ** 31 - 1000, 2 ** 31 + 1000), (n - 2000, n)]:
        a, b = max(lo - 2, 0), min(hi + 2, n)  # the window plus the filter's reach
        ref = scipy_reference("uniform_filter1d", cupy.asnumpy(x[a:b]), 5)
        assert_matches(cupy.asnumpy(y[lo:hi]), ref[lo - a: hi - a])
    del x, y
    cupy.get_default_memory_pool().free_all_blocks()


def test_cupy_array_over_2_to_31_elements_matches_scipy(rng):
    rows, cols = 2 ** 16 + 1, 2 ** 15 + 1
    x = _big_uint8(rows, cols, rng)
    y = gnd.gaussian_filter(x, 1.0)  # radius 4 on each axis
    for lo, hi in [(0, 16), (rows // 2 - 8, rows // 2 + 8), (rows - 16, rows)]:
        a, b = max(lo - 4, 0), min(hi + 4, rows)
        ref = scipy_reference("gaussian_filter", cupy.asnumpy(x[a:b]), 1.0)
        assert_matches(cupy.asnumpy(y[lo:hi]), ref[lo - a: hi - a])
    del x, y
    cupy.get_default_memory_pool().free_all_blocks()


# ----------------------------------------------------------------- streams


def test_cupy_call_inside_a_stream_context_is_ordered_on_that_stream(rng):
    s = cupy.cuda.Stream(non_blocking=True)
    host = random_array(rng, (64, 80), np.float32)
    with s:
        x = cupy.asarray(host)
        y = gnd.gaussian_filter(x, 2.0)
        back = cupy.asnumpy(y, stream=s)
    s.synchronize()
    assert_matches(back, scipy_reference("gaussian_filter", host, 2.0))


@pytest.mark.parametrize("as_int", [False, True], ids=["stream-object", "stream-int"])
def test_cupy_explicit_stream_argument(as_int, rng):
    s = cupy.cuda.Stream(non_blocking=True)
    host = random_array(rng, (64, 80), np.float32)
    x = cupy.asarray(host)
    out = cupy.zeros_like(x)
    cupy.cuda.get_current_stream().synchronize()  # x and out are ready before s runs
    result = gnd.uniform_filter(x, 5, output=out, stream=s.ptr if as_int else s)
    assert result is out
    s.synchronize()
    assert_matches(cupy.asnumpy(out), scipy_reference("uniform_filter", host, 5))


@pytest.mark.parametrize("bad", [-1, "0", 1.5, True, object()])
def test_cupy_invalid_stream_argument_raises_type_error(bad, rng):
    x = device_array(rng, (8, 9), np.float32)
    out = cupy.zeros_like(x)
    with pytest.raises(TypeError, match="stream"):
        gnd.gaussian_filter(x, 1.0, output=out, stream=bad)
    assert not cupy.asnumpy(out).any()


class CAIWrapper:
    """Exports only the CUDA Array Interface of `array`, with `stream` as the
    producer's stream (numba-like)."""

    def __init__(self, array, stream=None):
        self._array = array
        self._stream = stream

    @property
    def __cuda_array_interface__(self):
        cai = dict(self._array.__cuda_array_interface__)
        cai["stream"] = self._stream
        return cai


def test_describe_cai_reports_producer_stream_and_device(rng):
    s = cupy.cuda.Stream(non_blocking=True)
    x = device_array(rng, (4, 5), np.float32)
    seen = gpufilt.describe(CAIWrapper(x, s.ptr))
    assert seen["protocol"] == "cuda_array_interface"
    assert (seen["device"], seen["device_id"]) == ("cuda", x.device.id)
    assert seen["data"] == x.data.ptr
    assert seen["stream"] == s.ptr


def test_describe_cupy_array_reports_device_pointer(rng):
    x = device_array(rng, (6, 8), np.float64)[::2, ::-1]
    seen = gpufilt.describe(x)
    assert (seen["device"], seen["device_id"]) == ("cuda", x.device.id)
    assert (seen["data"], seen["shape"], seen["strides"]) == (x.data.ptr, x.shape, x.strides)
    assert seen["dtype"] == "float64"


def _written_late(s, new):
    """A cupy array that holds zeros until `new` lands in it on stream s,
    behind a long queue of work there (tens of ms)."""
    x = cupy.zeros(new.shape, cupy.float32)
    busy = cupy.ones((4096, 4096), cupy.float32)
    cupy.cuda.Device().synchronize()
    with s:
        for _ in range(10):
            busy = busy @ busy / 4096
        x.set(new, stream=s)
    return x


def test_cai_producer_stream_is_waited_on(rng):
    # The producer writes x on stream s; gpufilt, called on another stream,
    # must see the written values (it has to wait for s through an event,
    # not read x early).
    s = cupy.cuda.Stream(non_blocking=True)
    new = random_array(rng, (256, 256), np.float32)
    out = cupy.zeros((256, 256), cupy.float32)  # ready before _written_late's synchronize
    x = _written_late(s, new)
    other = cupy.cuda.Stream(non_blocking=True)
    gnd.gaussian_filter(CAIWrapper(x, s.ptr), 1.5, output=out, stream=other)
    other.synchronize()
    s.synchronize()
    assert_matches(cupy.asnumpy(out), scipy_reference("gaussian_filter", new, 1.5))


def test_describe_reads_a_cupy_array_from_its_fields_with_the_current_stream(rng):
    # interop.cpp import_cupy: what the CAI v3 export would say, without it.
    x = device_array(rng, (6, 8), np.float32)[1:, ::-2]
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        seen = gpufilt.describe(x)
    want = x.__cuda_array_interface__
    assert seen["protocol"] == "cupy"
    assert (seen["data"], seen["shape"], seen["strides"]) == (want["data"][0], want["shape"], want["strides"])
    assert (seen["device_id"], seen["stream"], seen["readonly"]) == (x.device.id, s.ptr, False)


def test_a_cupy_subclass_is_imported_through_its_protocols(rng):
    class Sub(cupy.ndarray):
        pass

    x = device_array(rng, (5, 7), np.float32).view(Sub)
    assert gpufilt.describe(x)["protocol"] != "cupy"
    assert_matches(cupy.asnumpy(gnd.uniform_filter(x, 3)),
                   scipy_reference("uniform_filter", cupy.asnumpy(x), 3))


@pytest.mark.parametrize("output", ["new", "given"])
def test_cupy_input_written_on_the_current_stream_is_waited_on(output, rng):
    # x is written on s, cupy's current stream at the call; gpufilt, told to
    # run on another stream, must wait for s (an event).
    s = cupy.cuda.Stream(non_blocking=True)
    new = random_array(rng, (256, 256), np.float32)
    out = cupy.zeros((256, 256), cupy.float32)  # ready before _written_late's synchronize
    x = _written_late(s, new)
    other = cupy.cuda.Stream(non_blocking=True)
    with s:
        got = gnd.gaussian_filter(x, 1.5, output=None if output == "new" else out, stream=other)
    other.synchronize()
    s.synchronize()
    assert_matches(cupy.asnumpy(got), scipy_reference("gaussian_filter", new, 1.5))


def test_cai_only_input_returns_a_cupy_array(rng):
    x = device_array(rng, (10, 12), np.float64)
    got = gnd.uniform_filter(CAIWrapper(x), 3)
    assert type(got) is cupy.ndarray and got.device.id == x.device.id
    assert_matches(cupy.asnumpy(got), scipy_reference("uniform_filter", cupy.asnumpy(x), 3))


# ----------------------------------------------------------- graph capture


@pytest.mark.parametrize("name,args", [("gaussian_filter", (1.0,)), ("uniform_filter", (3,)),
                                       ("correlate1d", ([0.5, -1.0, 2.0],))])
def test_cuda_graph_capture_replays_on_new_data(name, args, rng):
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        x = cupy.asarray(random_array(rng, (40, 52), np.float32))
        y = cupy.zeros_like(x)
    s.synchronize()
    with s:
        s.begin_capture()
        try:
            getattr(gnd, name)(x, *args, output=y)
        finally:
            graph = s.end_capture()
    # Nothing ran during capture; replay on data written after it.
    new = random_array(rng, x.shape, np.float32)
    with s:
        x.set(new, stream=s)
        y.fill(np.nan)
    graph.launch(stream=s)
    s.synchronize()
    assert_matches(cupy.asnumpy(y), scipy_reference(name, new, *args))
    # A second replay on other data: the graph reads x each time.
    newer = random_array(rng, x.shape, np.float32)
    x.set(newer, stream=s)
    graph.launch(stream=s)
    s.synchronize()
    assert_matches(cupy.asnumpy(y), scipy_reference(name, newer, *args))


def test_cuda_graph_capture_with_explicit_stream_in_place(rng):
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        x = cupy.asarray(random_array(rng, (30, 31), np.float64))
    s.synchronize()
    with s:
        s.begin_capture()
        try:
            gnd.gaussian_filter(x, 1.5, output=x, stream=s)
        finally:
            graph = s.end_capture()
    start = random_array(rng, x.shape, np.float64)
    x.set(start, stream=s)
    graph.launch(stream=s)
    s.synchronize()
    assert_matches(cupy.asnumpy(x), scipy_reference("gaussian_filter", start, 1.5))


# --------------------------------------------------------- devices, mixing


def test_cpu_input_with_gpu_output_raises_value_error(rng):
    x = random_array(rng, (6, 7), np.float32)
    out = cupy.zeros((6, 7), cupy.float32)
    before = x.copy()
    with pytest.raises(ValueError, match="device"):
        gnd.gaussian_filter(x, 1.0, output=out)
    np.testing.assert_array_equal(x, before)
    assert not cupy.asnumpy(out).any()


def test_gpu_input_with_cpu_output_raises_value_error(rng):
    x = device_array(rng, (6, 7), np.float32)
    out = np.zeros((6, 7), np.float32)
    with pytest.raises(ValueError, match="device"):
        gnd.uniform_filter(x, 3, output=out)
    assert not out.any()


def test_numpy_input_still_runs_on_cpu_in_a_cuda_build(rng):
    x = random_array(rng, (9, 11), np.float64)
    got = gnd.gaussian_filter(x, 1.2)
    assert type(got) is np.ndarray
    assert_matches(got, scipy_reference("gaussian_filter", x, 1.2))


def test_info_reports_a_usable_device():
    facts = gpufilt.info()
    assert facts["build"]["cuda"] is True
    assert facts["cuda"]["usable"] is True and facts["cuda"]["devices"]
    assert cupy.cuda.runtime.getDeviceCount() == len(facts["cuda"]["devices"])


@pytest.fixture
def two_devices():
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two CUDA devices")


def test_array_on_another_device_runs_there_and_restores_current_device(two_devices, rng):
    host = random_array(rng, (20, 30), np.float32)
    with cupy.cuda.Device(1):
        x = cupy.asarray(host)
    assert cupy.cuda.runtime.getDevice() == 0
    got = gnd.gaussian_filter(x, 1.0)
    assert cupy.cuda.runtime.getDevice() == 0
    assert got.device.id == 1
    assert_matches(cupy.asnumpy(got), scipy_reference("gaussian_filter", host, 1.0))


def test_cai_only_array_on_another_device_runs_there(two_devices, rng):
    host = random_array(rng, (20, 30), np.float32)
    with cupy.cuda.Device(1):
        x = cupy.asarray(host)
    got = gnd.uniform_filter(CAIWrapper(x), 3)
    assert got.device.id == 1
    assert_matches(cupy.asnumpy(got), scipy_reference("uniform_filter", host, 3))


def test_arrays_on_two_devices_raise_value_error(two_devices, rng):
    x = device_array(rng, (5, 6), np.float32)
    with cupy.cuda.Device(1):
        out = cupy.zeros((5, 6), cupy.float32)
    with pytest.raises(ValueError, match="device"):
        gnd.uniform_filter(x, 3, output=out)


# -------------------------------------------------------------------- torch


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    return torch


@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8", "int16", "complex64"])
def test_torch_cuda_tensor_returns_tensor_on_its_device(torch, dtype, rng):
    host = random_array(rng, (17, 23), dtype)
    x = torch.from_numpy(host).to("cuda")
    got = gnd.uniform_filter(x, 3)
    assert isinstance(got, torch.Tensor)
    assert got.device == x.device and got.dtype == x.dtype
    assert_matches(got.cpu().numpy(), scipy_reference("uniform_filter", host, 3))


def test_torch_cuda_output_tensor_in_place(torch, rng):
    host = random_array(rng, (17, 23), np.float32)
    x = torch.from_numpy(host).to("cuda")
    assert gnd.gaussian_filter(x, 1.4, output=x) is x
    assert_matches(x.cpu().numpy(), scipy_reference("gaussian_filter", host, 1.4))


def test_torch_cuda_output_tensor_of_other_dtype(torch, rng):
    host = random_array(rng, (17, 23), np.float32)
    x = torch.from_numpy(host).to("cuda")
    out = torch.empty(17, 23, dtype=torch.float64, device="cuda")
    assert gnd.gaussian_filter1d(x, 1.4, output=out) is out
    expected = scipy_reference("gaussian_filter1d", host, 1.4, output=np.float64)
    assert_matches(out.cpu().numpy(), expected)


def test_torch_cuda_non_contiguous_view(torch, rng):
    host = random_array(rng, (20, 30), np.float64)
    x = torch.from_numpy(host).to("cuda").t()[::2]
    got = gnd.gaussian_filter(x, 1.0, mode="nearest")
    assert_matches(got.cpu().numpy(),
                   scipy_reference("gaussian_filter", host.T[::2], 1.0, mode="nearest"))


def test_torch_cuda_tensor_requiring_grad_is_accepted_under_no_grad(torch, rng):
    host = random_array(rng, (12, 13), np.float32)
    x = torch.tensor(host, device="cuda", requires_grad=True)
    with torch.no_grad():
        got = gnd.gaussian_filter(x, 1.0)
    assert isinstance(got, torch.Tensor) and got.device == x.device
    assert_matches(got.detach().cpu().numpy(), scipy_reference("gaussian_filter", host, 1.0))


def test_torch_cuda_on_a_torch_stream(torch, rng):
    host = random_array(rng, (64, 64), np.float32)
    s = torch.cuda.Stream()
    x = torch.from_numpy(host).to("cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        got = gnd.uniform_filter(x, 5)
    s.synchronize()
    assert_matches(got.cpu().numpy(), scipy_reference("uniform_filter", host, 5))
    out = torch.empty_like(x)
    assert gnd.uniform_filter(x, 5, output=out, stream=s) is out
    s.synchronize()
    assert_matches(out.cpu().numpy(), scipy_reference("uniform_filter", host, 5))


def test_torch_cpu_input_with_cuda_output_raises_value_error(torch, rng):
    x = torch.from_numpy(random_array(rng, (5, 6), np.float32))
    out = torch.zeros(5, 6, device="cuda")
    with pytest.raises(ValueError, match="device"):
        gnd.gaussian_filter(x, 1.0, output=out)
    assert not out.any().item()


# -------------------------------------------------------------------- numba


@pytest.fixture
def numba_cuda():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba may warn on import (deprecations, versions)
        pytest.importorskip("numba")
        from numba import cuda
    if not cuda.is_available():
        pytest.skip("numba sees no CUDA device")
    return cuda


def _to_numba(numba_cuda, host):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return numba_cuda.to_device(host)


def test_numba_device_array_returns_cupy_array(numba_cuda, rng):
    host = random_array(rng, (15, 21), np.float32)
    x = _to_numba(numba_cuda, host)
    assert hasattr(x, "__cuda_array_interface__")
    if not hasattr(x, "__dlpack__"):
        assert gpufilt.describe(x)["protocol"] == "cuda_array_interface"
    got = gnd.gaussian_filter(x, 1.1, mode="mirror")
    assert type(got) is cupy.ndarray
    assert_matches(cupy.asnumpy(got), scipy_reference("gaussian_filter", host, 1.1, mode="mirror"))
    np.testing.assert_array_equal(x.copy_to_host(), host)


def test_numba_device_array_as_output(numba_cuda, rng):
    host = random_array(rng, (15, 21), np.float64)
    x = cupy.asarray(host)
    out = _to_numba(numba_cuda, np.zeros((15, 21)))
    assert gnd.uniform_filter(x, 3, output=out) is out
    assert_matches(out.copy_to_host(), scipy_reference("uniform_filter", host, 3))


def test_numba_device_array_in_place(numba_cuda, rng):
    host = random_array(rng, (15, 21), np.float64)
    x = _to_numba(numba_cuda, host)
    assert gnd.gaussian_filter1d(x, 2.0, output=x) is x
    assert_matches(x.copy_to_host(), scipy_reference("gaussian_filter1d", host, 2.0))


# ---------------------------------------------------------------------- jax


def test_jax_gpu_array_returns_jax_array_on_its_device(jax_gpu, rng):
    jax, gpu = jax_gpu
    host = random_array(rng, (16, 18), np.float32)
    x = jax.device_put(host, gpu)
    got = gnd.gaussian_filter(x, 1.3)
    assert isinstance(got, jax.Array)
    assert got.devices() == {gpu}
    assert got.dtype == np.float32
    assert_matches(np.asarray(got), scipy_reference("gaussian_filter", host, 1.3))
    np.testing.assert_array_equal(np.asarray(x), host)


def test_jax_gpu_array_as_output_raises_value_error(jax_gpu, rng):
    jax, gpu = jax_gpu
    x = device_array(rng, (4, 5), np.float32)
    out = jax.device_put(np.ones((4, 5), np.float32), gpu)
    with pytest.raises(ValueError, match="read-only"):
        gnd.uniform_filter(x, 3, output=out)
    np.testing.assert_array_equal(np.asarray(out), 1)


# ------------------------------------- last: a CAI pointer that is not device memory


def test_cai_with_host_pointer_is_refused_without_launching(rng):
    # A CUDA Array Interface over pageable host memory: nothing may run on it.
    host = random_array(rng, (4, 5), np.float32)

    class HostCAI:
        __cuda_array_interface__ = {"shape": host.shape, "typestr": host.dtype.str,
                                    "data": (host.ctypes.data, False), "version": 3,
                                    "strides": None}

    assert gpufilt.describe(HostCAI())["device_id"] == -1
    with pytest.raises((ValueError, gpufilt.CudaError)):
        gnd.uniform_filter(HostCAI(), 3, output=cupy.zeros((4, 5), cupy.float32))
    cupy.cuda.Device().synchronize()  # the context is still healthy
