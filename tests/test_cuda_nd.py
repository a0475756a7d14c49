"""The N-D filters on cupy arrays: correlate, convolve, the minimum/maximum
(1-D and N-D), median, rank and percentile filters, sobel, prewitt, laplace,
gaussian_laplace, gaussian_gradient_magnitude, generic_laplace and
generic_gradient_magnitude (with derivatives that call gpufilt on the
device), and footprints beyond the CUDA tap table (more than 512 taps or
more than 4 axes: the bounding-box form, and its weights limit).

Every test is marked `cuda` (skipped without a usable device, see
conftest.py). scipy on the host is the oracle; results come back to the host
with cupy.asnumpy in the test only. Argument builders and derivative
callbacks are shared with the CPU tests (test_filters_nd).
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage as snd

from gpufilt import ndimage as gnd

from _helpers import COMPLEX_DTYPES, MODES, assert_matches, random_array, scipy_reference
from test_filters_nd import (DERIVATIVE_FACTORIES, DERIVATIVES, FOOTPRINT_FILTERS, FUNCTIONS,
                             ONE_D, ORDER_STATS, REAL_DTYPES, REAL_ONLY, WEIGHTED, Derivative,
                             call, cross, data, filter_args, needs_signed_output, reference,
                             signed_weights)

pytestmark = pytest.mark.cuda

cupy = pytest.importorskip("cupy")

from test_cuda import CUPY_VIEWS, _cupy_views  # noqa: E402 - needs cupy

GPU_MAX_TAPS = 512  # taps of the CUDA tap-table form (larger footprints: the box form)


def to_device(x):
    return cupy.asarray(x)


def check_cupy(name, x, *args, **kwargs):
    """gpufilt's `name` on cupy array x against scipy on its host copy: the
    result is a new cupy array on x's device with scipy's dtype and values,
    and x is untouched."""
    host = cupy.asnumpy(x)
    got = call(gnd, name, x, *args, **kwargs)
    assert type(got) is cupy.ndarray
    assert got.device.id == x.device.id
    want = reference(name, host, *args, **kwargs)
    assert got.dtype == want.dtype, f"dtype {got.dtype}, scipy gives {want.dtype}"
    assert_matches(cupy.asnumpy(got), want, err_msg=name)
    np.testing.assert_array_equal(cupy.asnumpy(x), host, err_msg="the input was modified")
    return got


def check_default(name, x, rng, **overrides):
    """check_cupy() with test_filters_nd's ordinary arguments for `name`."""
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    kwargs.update(overrides)
    if needs_signed_output(name, x.dtype) and "output" not in kwargs:
        kwargs["output"] = np.int32
    return check_cupy(name, x, *args, **kwargs)


def device_data(rng, shape, dtype, name=None):
    return to_device(data(rng, shape, dtype, name))


def order_stat_args(name, fp):
    """Positional arguments of an order-statistic filter with footprint fp."""
    taps = int(np.count_nonzero(fp))
    if name == "rank_filter":
        return (taps // 3,)
    if name == "percentile_filter":
        return (70,)
    return ()


# ------------------------------------------------------------ cupy parity


@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_dtype_matches_scipy(name, dtype, rng):
    x = device_data(rng, (37, 45), dtype, name)  # not a multiple of any block size
    check_default(name, x, rng)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_three_dimensional_matches_scipy(name, dtype, rng):
    x = device_data(rng, (9, 17, 33), dtype, name)
    check_default(name, x, rng)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_mode_matches_scipy(name, mode, rng):
    x = device_data(rng, (13, 17), np.float64, name)
    check_default(name, x, rng, mode=mode, cval=1.25)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float16", "float32"])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS + ONE_D)
def test_cupy_cval_matches_scipy_for_each_dtype(name, dtype, rng):
    x = device_data(rng, (11, 14), dtype, name)
    check_default(name, x, rng, mode="constant", cval=7.75)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS + ONE_D)
def test_cupy_line_shorter_than_footprint_matches_scipy(name, n, mode, rng):
    x = to_device(random_array(rng, (3, n), np.float64))
    kwargs = {"mode": mode, "cval": -0.5}
    if name in WEIGHTED:
        check_cupy(name, x, signed_weights(rng, (2, 7)), **kwargs)
    elif name in ONE_D:
        check_cupy(name, x, 6, axis=-1, **kwargs)
    else:
        fp = np.ones((2, 7), bool)
        fp[0, 3] = False
        check_cupy(name, x, *order_stat_args(name, fp), footprint=fp, **kwargs)


@pytest.mark.parametrize("shape", [(50,), (7, 8), (4, 5, 6), (3, 4, 5, 3)])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_number_of_dimensions_matches_scipy(name, shape, rng):
    x = device_data(rng, shape, np.float32, name)
    check_default(name, x, rng)


@pytest.mark.parametrize("modes", [["reflect", "constant", "wrap"], ("mirror", "nearest",
                                                                     "grid-wrap")])
@pytest.mark.parametrize("name", ["minimum_filter", "maximum_filter", "sobel", "laplace",
                                  "gaussian_gradient_magnitude"])
def test_cupy_per_axis_modes_match_scipy(name, modes, rng):
    x = device_data(rng, (9, 10, 11), np.float32, name)
    if name in ("minimum_filter", "maximum_filter"):
        check_cupy(name, x, size=(3, 2, 4), mode=modes, cval=-2.0)
    else:
        check_default(name, x, rng, mode=modes, cval=-2.0)


# -------------------------------------------------------------- footprints


@pytest.mark.parametrize("shape", [(3, 4), (2, 5), (1, 6), (7, 7)])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_cupy_extreme_origins_match_scipy(name, shape, rng):
    x = to_device(random_array(rng, (19, 23), np.float64))
    fp = rng.random(shape) < 0.7
    fp.flat[0] = True
    lo = tuple(-(n // 2) for n in shape)
    hi = tuple((n - 1) // 2 for n in shape)
    for origin in (lo, hi, (lo[0], hi[1])):
        kwargs = {"origin": origin, "mode": "constant", "cval": 0.5}
        if name in WEIGHTED:
            check_cupy(name, x, signed_weights(rng, shape) * fp, **kwargs)
        else:
            check_cupy(name, x, *order_stat_args(name, fp), footprint=fp, **kwargs)


@pytest.mark.parametrize("ndim", [2, 3])
@pytest.mark.parametrize("side", [2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_cupy_random_footprint_up_to_7x7x7_matches_scipy(name, side, ndim, rng):
    # Up to 343 taps: within the CUDA limit of 512.
    x = to_device(random_array(rng, (12, 13, 14)[:ndim], np.float32))
    fp = rng.random((side,) * ndim) < 0.6
    fp.flat[0] = True
    if name in WEIGHTED:
        check_cupy(name, x, signed_weights(rng, fp.shape) * fp, mode="mirror")
    else:
        check_cupy(name, x, *order_stat_args(name, fp), footprint=fp, mode="mirror")


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64"])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_cupy_full_7x7x7_footprint_matches_scipy(name, dtype, rng):
    x = to_device(random_array(rng, (11, 12, 13), dtype))
    fp = np.ones((7, 7, 7), bool)
    if name in WEIGHTED:
        w = rng.random(fp.shape) + 0.05 if np.dtype(dtype).kind == "u" else \
            rng.standard_normal(fp.shape)
        check_cupy(name, x, w / w.sum() if np.dtype(dtype).kind == "u" else w, mode="reflect")
    else:
        check_cupy(name, x, *order_stat_args(name, fp), footprint=fp, mode="reflect")


@pytest.mark.parametrize("mode", ["reflect", "constant", "nearest", "wrap"])
def test_cupy_15x15_median_on_uint8_matches_scipy(mode, rng):
    x = to_device(random_array(rng, (61, 67), np.uint8))
    got = check_cupy("median_filter", x, size=15, mode=mode, cval=100)
    assert got.dtype == np.uint8


@pytest.mark.parametrize("taps", [9, 32, 33, 100, 128, 129, 300, 512])
def test_cupy_rank_filter_at_each_footprint_capacity_matches_scipy(taps, rng):
    # The CUDA rank kernel is specialised for footprints of <= 32, <= 128 and
    # <= 512 taps: both sides of each boundary.
    x = to_device(random_array(rng, (29, 31), np.float32))
    fp = np.zeros(27 * 27, bool)
    fp[rng.permutation(fp.size)[:taps]] = True
    fp = fp.reshape(27, 27)
    for rank in (1, taps // 2, -2):
        if -taps <= rank < taps:
            check_cupy("rank_filter", x, rank, footprint=fp, mode="nearest")


@pytest.mark.parametrize("name", ["correlate", "minimum_filter", "median_filter"])
def test_cupy_footprint_of_exactly_512_taps_matches_scipy(name, rng):
    x = to_device(random_array(rng, (40, 41), np.float32))
    fp = np.zeros((24, 24), bool)
    fp.flat[rng.permutation(fp.size)[:GPU_MAX_TAPS]] = True
    if name == "correlate":
        check_cupy(name, x, signed_weights(rng, fp.shape) * fp + 0.5 * fp)
    else:
        check_cupy(name, x, footprint=fp)


@pytest.mark.parametrize("name", ORDER_STATS)
def test_cupy_non_box_footprint_matches_scipy(name, rng):
    x = to_device(random_array(rng, (17, 19), np.int16))
    ring = np.ones((5, 5), bool)
    ring[1:4, 1:4] = False
    for fp in (ring, cross(2, 5), np.eye(4, dtype=bool)):
        check_cupy(name, x, *order_stat_args(name, fp), footprint=fp, mode="wrap")


@pytest.mark.parametrize("rank", [-9, -5, -1, 0, 3, 8])
def test_cupy_rank_of_3x3_matches_scipy(rank, rng):
    x = to_device(random_array(rng, (21, 22), np.float64))
    check_cupy("rank_filter", x, rank, size=3, mode="mirror")


@pytest.mark.parametrize("percentile", [-100, -50, 0, 33.3, 50, 100])
def test_cupy_percentile_matches_scipy(percentile, rng):
    x = to_device(random_array(rng, (21, 22), np.float32))
    check_cupy("percentile_filter", x, percentile, size=(3, 4))


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64",
                                   "uint64"])
@pytest.mark.parametrize("name", ORDER_STATS + ONE_D)
def test_cupy_integer_extremes_match_scipy_exactly_for_order_statistics(name, dtype, rng):
    # scipy converts 64-bit values through double (x86 rules): the GPU must too.
    info = np.iinfo(dtype)
    host = rng.choice(np.array([info.min, info.max, info.min + 1, info.max - 1, 0], dtype=dtype),
                      size=(13, 14))
    args, kwargs = filter_args(name, rng, dtype, host.ndim)
    got = getattr(gnd, name)(to_device(host), *args, mode="nearest", **kwargs)
    np.testing.assert_array_equal(cupy.asnumpy(got),
                                  getattr(snd, name)(host, *args, mode="nearest", **kwargs))


@pytest.mark.parametrize("axes", [(0,), (2, 0), (1, 2), (-1,)])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_cupy_axes_subset_matches_scipy(name, axes, rng):
    x = to_device(random_array(rng, (7, 8, 9), np.float64))
    shape = [3, 4][:len(axes)]
    if name in WEIGHTED:
        check_cupy(name, x, signed_weights(rng, shape), axes=axes, mode="nearest")
    elif name in ("rank_filter", "percentile_filter"):
        check_cupy(name, x, 2 if name == "rank_filter" else 40, size=shape, axes=axes)
    else:
        check_cupy(name, x, size=shape, axes=axes)


@pytest.mark.parametrize("name", ["sobel", "prewitt"])
@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_cupy_edge_filter_along_each_axis_matches_scipy(name, ndim, rng):
    x = to_device(random_array(rng, [9, 8, 7, 6][:ndim], np.float32))
    for axis in range(-ndim, ndim):
        check_cupy(name, x, axis=axis, mode="reflect")


# ------------------------------------------- footprints over the tap table


def _over_limit(name, rng):
    """Arguments of `name` with a footprint of more than 512 taps (23 x 23 =
    529; not a box for min/max, which would be separable): the box form."""
    fp = np.ones((23, 23), bool)
    if name in WEIGHTED:
        return (rng.random(fp.shape) + 0.5,), {}
    if name in ("minimum_filter", "maximum_filter"):
        fp[0, 0] = False  # 528 taps
        return (), {"footprint": fp}
    return order_stat_args(name, fp), {"size": 23}


@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_cupy_footprint_over_512_taps_matches_scipy(name, rng):
    # Formerly a ValueError (the tap table's limit); now the box form.
    x = to_device(random_array(rng, (30, 31), np.float32))
    args, kwargs = _over_limit(name, rng)
    check_cupy(name, x, *args, **kwargs)


@pytest.mark.parametrize("name", ["minimum_filter", "maximum_filter"])
def test_cupy_large_box_min_max_has_no_tap_limit(name, rng):
    # A box is separable: 31 x 31 = 961 taps, as 1-D passes.
    x = to_device(random_array(rng, (40, 45), np.float32))
    check_cupy(name, x, size=31)
    check_cupy(name, x, footprint=np.ones((25, 25), bool))


def test_cupy_footprint_over_512_taps_still_runs_on_the_cpu(rng):
    # The CPU path has no tap limit at all.
    x = random_array(rng, (30, 31), np.float32)
    got = gnd.median_filter(x, size=23)
    assert_matches(got, snd.median_filter(x, size=23))


# ---------------------------------------------------------------- complex


@pytest.mark.parametrize("dtype", COMPLEX_DTYPES)
@pytest.mark.parametrize("name", WEIGHTED)
def test_cupy_complex_input_matches_scipy(name, dtype, rng):
    x = to_device(random_array(rng, (13, 15), dtype))
    check_cupy(name, x, signed_weights(rng, (3, 4)))


@pytest.mark.parametrize("mode", ["constant", "grid-constant", "reflect"])
@pytest.mark.parametrize("dtype", ["float32", "float64"] + COMPLEX_DTYPES)
@pytest.mark.parametrize("name", WEIGHTED)
def test_cupy_complex_weights_and_cval_match_scipy(name, dtype, mode, rng):
    x = to_device(random_array(rng, (13, 15), dtype))
    w = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))
    cval = 0.75 - 2.5j if np.dtype(dtype).kind == "c" else 0.75
    got = check_cupy(name, x, w, mode=mode, cval=cval, origin=(1, 0))
    assert got.dtype.kind == "c"


@pytest.mark.parametrize("complex_weights", [False, True])
@pytest.mark.parametrize("name", WEIGHTED)
def test_cupy_complex_in_place_matches_scipy_on_a_copy(name, complex_weights, rng):
    x = to_device(random_array(rng, (12, 13), np.complex128))
    w = rng.standard_normal((3, 3))
    if complex_weights:
        w = w + 1j * rng.standard_normal((3, 3))
    expected = scipy_reference(name, cupy.asnumpy(x), w, mode="constant", cval=1 - 1j)
    assert getattr(gnd, name)(x, w, output=x, mode="constant", cval=1 - 1j) is x
    assert_matches(cupy.asnumpy(x), expected)


@pytest.mark.parametrize("name", REAL_ONLY)
def test_cupy_complex_input_to_order_statistics_raises_type_error(name, rng):
    x = to_device(random_array(rng, (6, 7), np.complex64))
    host = cupy.asnumpy(x)
    args, kwargs = filter_args(name, rng, np.float32, x.ndim)
    with pytest.raises(TypeError, match="complex"):
        getattr(gnd, name)(x, *args, **kwargs)
    np.testing.assert_array_equal(cupy.asnumpy(x), host)


# ------------------------------------------------------------ derivatives


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("extra", [
    {"extra_arguments": ([1.0, -2.0, 1.0],)},
    {"extra_arguments": ([1.0, -2.0, 1.0], 0.25)},
    {"extra_arguments": ([0.5, -1.0, 0.25, 0.25],), "extra_keywords": {"origin": -1}},
])
def test_cupy_generic_laplace_with_gpufilt_derivative_matches_scipy(dtype, extra, rng):
    x = to_device(random_array(rng, (9, 10, 11), dtype))
    check_cupy("generic_laplace", x, Derivative("second_difference"), mode="nearest", **extra)


@pytest.mark.parametrize("derivative,extra", [
    ("sobel", {}),
    ("scaled_sobel", {"extra_arguments": (0.5,)}),
    ("scaled_sobel", {"extra_arguments": (2.0,), "extra_keywords": {"offset_weight": 0.25}}),
])
def test_cupy_generic_gradient_magnitude_with_gpufilt_derivative_matches_scipy(derivative, extra,
                                                                              rng):
    x = to_device(random_array(rng, (9, 10, 11), np.float32) / 8)
    check_cupy("generic_gradient_magnitude", x, Derivative(derivative), mode="reflect", **extra)


@pytest.mark.parametrize("name", ["generic_laplace", "generic_gradient_magnitude"])
def test_cupy_derivative_callback_gets_the_cupy_array(name, rng):
    x = to_device(random_array(rng, (8, 9, 10), np.float32))
    seen = []
    inner = DERIVATIVE_FACTORIES["sobel"](gnd)

    def spy(input, axis, output, mode, cval):
        result = inner(input, axis, output, mode, cval)
        seen.append((input is x, axis, type(result) is cupy.ndarray))
        return result
    got = getattr(gnd, name)(x, spy, mode=["wrap", "nearest"], axes=(2, 0))
    assert seen == [(True, 2, True), (True, 0, True)]
    assert type(got) is cupy.ndarray
    want = getattr(snd, name)(cupy.asnumpy(x), DERIVATIVE_FACTORIES["sobel"](snd),
                              mode=["wrap", "nearest"], axes=(2, 0))
    assert_matches(cupy.asnumpy(got), want)


@pytest.mark.parametrize("axes", [None, (0,), (2, 0), ()])
@pytest.mark.parametrize("name", ["laplace", "gaussian_laplace", "gaussian_gradient_magnitude",
                                  "generic_laplace", "generic_gradient_magnitude"])
def test_cupy_derivative_axes_match_scipy(name, axes, rng):
    x = to_device(random_array(rng, (7, 8, 9), np.float64))
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    if name == "gaussian_laplace":
        args = (1.2,)
    check_cupy(name, x, *args, axes=axes, **kwargs)


@pytest.mark.parametrize("output", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("name", DERIVATIVES)
def test_cupy_derivative_output_dtype_matches_scipy(name, output, rng):
    x = device_data(rng, (13, 14), np.int16, name)
    got = check_default(name, x, rng, output=output)
    assert got.dtype == np.dtype(output)


# ----------------------------------------------------------------- layouts




@pytest.mark.parametrize("view", CUPY_VIEWS)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_view_input_matches_scipy(name, view, rng):
    x = _cupy_views(rng, np.float32)[view]
    check_default(name, x, rng)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_broadcast_input_matches_scipy(name, rng):
    # A zero stride on the device.
    x = cupy.broadcast_to(to_device(random_array(rng, (9, 11), np.float32)), (5, 9, 11))
    check_default(name, x, rng)


@pytest.mark.parametrize("view", CUPY_VIEWS)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_view_output_is_written_and_returned(name, view, rng):
    out = _cupy_views(rng, np.float64)[view]
    x = device_data(rng, out.shape, np.float32, name)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    assert call(gnd, name, x, *args, output=out, **kwargs) is out
    expected = reference(name, cupy.asnumpy(x), *args, output=np.float64, **kwargs)
    assert_matches(cupy.asnumpy(out), expected)


@pytest.mark.parametrize("dtype", ["int32", "float32"])
@pytest.mark.parametrize("name", ["minimum_filter", "median_filter", "rank_filter", "laplace",
                                  "gaussian_laplace", "generic_gradient_magnitude"])
def test_cupy_zero_dimensional_matches_scipy(name, dtype, rng):
    x = to_device(data(rng, (), dtype, name))
    args, kwargs = filter_args(name, rng, x.dtype, 0)
    if name in ORDER_STATS:
        args, kwargs = ((0,) if name == "rank_filter" else ()), {"size": 3}
    if name == "gaussian_laplace":
        args = (1.0,)
    assert check_cupy(name, x, *args, **kwargs).shape == ()


@pytest.mark.parametrize("shape", [(0,), (0, 5), (5, 0), (3, 0, 4)])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_empty_matches_scipy(name, shape, rng):
    x = cupy.empty(shape, cupy.float32)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    assert check_cupy(name, x, *args, **kwargs).shape == shape


# ---------------------------------------------------------- cupy outputs


@pytest.mark.parametrize("output", [np.float32, "float64", np.dtype("int32"), np.float16])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_output_dtype_matches_scipy(name, output, rng):
    # Derivatives: small enough that float16 squares stay finite.
    x = to_device(rng.random((13, 17)) * (10 if name in DERIVATIVES else 50) + 1)
    args, kwargs = filter_args(name, rng, np.uint8, x.ndim)  # convex weights
    got = check_cupy(name, x, *args, output=output, **kwargs)
    assert got.dtype == np.dtype(output)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_output_array_is_written_and_returned_itself(name, rng):
    x = device_data(rng, (13, 17), np.float32, name)
    out = cupy.full(x.shape, np.nan, cupy.float32)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    assert call(gnd, name, x, *args, output=out, **kwargs) is out
    assert_matches(cupy.asnumpy(out), reference(name, cupy.asnumpy(x), *args, **kwargs))


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_in_place_matches_scipy_on_a_copy(name, dtype, rng):
    if needs_signed_output(name, dtype):
        dtype = "int16"
    x = device_data(rng, (14, 19), dtype, name)
    args, kwargs = filter_args(name, rng, dtype, x.ndim)
    expected = reference(name, cupy.asnumpy(x), *args, **kwargs)
    assert call(gnd, name, x, *args, output=x, **kwargs) is x
    assert_matches(cupy.asnumpy(x), expected)


def _overlapping_pairs(rng):
    square = to_device(random_array(rng, (33, 33), np.float64))
    grid = to_device(random_array(rng, (20, 41), np.float64))
    cube = to_device(random_array(rng, (6, 9, 9), np.float64))
    return {
        "transposed": (square, square.T),
        "rows-shifted": (grid[:-1], grid[1:]),
        "rows-shifted-back": (grid[1:], grid[:-1]),
        "columns-shifted": (grid[:, 3:], grid[:, :-3]),
        "reversed": (grid, grid[::-1, ::-1]),
        "swapped-axes": (cube, cube.transpose(0, 2, 1)),
    }


@pytest.mark.parametrize("overlap", ["transposed", "rows-shifted", "rows-shifted-back",
                                     "columns-shifted", "reversed", "swapped-axes"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cupy_overlapping_output_matches_scipy_on_a_copy(name, overlap, rng):
    x, out = _overlapping_pairs(rng)[overlap]
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    expected = reference(name, cupy.asnumpy(x), *args, **kwargs)
    assert call(gnd, name, x, *args, output=out, **kwargs) is out
    assert_matches(cupy.asnumpy(out), expected)


# ---------------------------------------------------------------- streams


@pytest.mark.parametrize("name", ["median_filter", "correlate", "generic_laplace",
                                  "gaussian_gradient_magnitude"])
def test_cupy_filter_on_a_non_default_stream_matches_scipy(name, rng):
    # Every kernel and temporary of the call (several for the derivatives)
    # must be ordered on the current stream.
    host = data(rng, (64, 65), np.float32, name)
    args, kwargs = filter_args(name, rng, host.dtype, host.ndim)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        x = cupy.asarray(host)
        got = call(gnd, name, x, *args, **kwargs)
        result = cupy.asnumpy(got, stream=stream)
    stream.synchronize()
    assert_matches(result, reference(name, host, *args, **kwargs))


@pytest.mark.parametrize("name", ["minimum_filter", "correlate", "laplace"])
def test_cupy_filters_chained_on_a_stream_match_scipy(name, rng):
    # Output of one call is the input of the next, with no synchronisation.
    host = data(rng, (40, 41), np.float64, name)
    args, kwargs = filter_args(name, rng, host.dtype, host.ndim)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        y = cupy.asarray(host)
        for _ in range(3):
            y = call(gnd, name, y, *args, **kwargs)
        result = cupy.asnumpy(y, stream=stream)
    stream.synchronize()
    want = host
    for _ in range(3):
        want = reference(name, want, *args, **kwargs)
    assert_matches(result, want)


# ===================================================================
# Footprints beyond the CUDA tap table: the bounding-box form
# (src/cuda/footprint.cu). More than 512 taps, or extending along more than
# 4 axes: the footprint travels as its bounding box and a bitset of the box's
# cells, rank filters select by bisection without per-tap storage, and
# correlate/convolve take as many weights as fit in the kernel parameters.
# ===================================================================


def check_exact(name, x, *args, **kwargs):
    """check_cupy(), and the values exactly scipy's (order statistics)."""
    got = check_cupy(name, x, *args, **kwargs)
    want = reference(name, cupy.asnumpy(x), *args, **kwargs)
    np.testing.assert_array_equal(cupy.asnumpy(got), want, err_msg=name)
    return got


@pytest.mark.parametrize("mode", ["reflect", "constant", "nearest", "mirror", "wrap"])
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_box_form_median_25x25_matches_scipy(dtype, mode, rng):
    x = to_device(random_array(rng, (53, 47), dtype))
    got = check_exact("median_filter", x, size=(25, 25), mode=mode, cval=3)
    assert got.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "uint8", "int64", "float64"])
def test_box_form_median_larger_than_the_array_matches_scipy(dtype, rng):
    # Every output element is at the border: the box form's boundary path.
    x = to_device(random_array(rng, (9, 14), dtype))
    for mode in MODES:
        check_exact("median_filter", x, size=(25, 27), mode=mode)


@pytest.mark.parametrize("name", ["rank_filter", "percentile_filter"])
def test_box_form_random_11x11x5_footprint_matches_scipy(name, rng):
    fp = rng.random((11, 11, 5)) < 0.93
    fp.flat[0] = True
    assert np.count_nonzero(fp) > GPU_MAX_TAPS
    x = to_device(random_array(rng, (16, 18, 9), np.float32))
    taps = int(np.count_nonzero(fp))
    params = [0, 1, taps // 3, taps // 2, taps - 1, -1] if name == "rank_filter" else [0, 12.5, 50, 70, 100]
    for p in params:
        check_exact(name, x, p, footprint=fp, mode="mirror")


def test_box_form_rank_with_many_ties_matches_scipy(rng):
    # Few distinct values (uint8 of 0..3), negative zeros and infinities.
    x = to_device(rng.integers(0, 4, size=(40, 41), dtype=np.uint8))
    for rank in (0, 100, 312, 600, -1):
        check_exact("rank_filter", x, rank, size=25, mode="nearest")
    y = rng.choice(np.array([-0.0, 0.0, 1.5, -np.inf, np.inf, -7.25]), size=(30, 33))
    for rank in (0, 200, 400, -1):
        check_exact("rank_filter", to_device(y), rank, size=(21, 25), mode="wrap")


@pytest.mark.parametrize("dtype", ["float32", "int16", "uint8"])
@pytest.mark.parametrize("name", ["minimum_filter", "maximum_filter"])
def test_box_form_min_max_23x23_non_box_footprint_matches_scipy(name, dtype, rng):
    yy, xx = np.mgrid[-11:12, -11:12]
    disk = yy ** 2 + xx ** 2 <= 11 ** 2  # 529 cells, ~400 taps: not separable
    fp = rng.random((23, 23)) < 0.985    # 23 x 23 with holes: over 512 taps
    fp[11, 11] = True
    assert np.count_nonzero(fp) > GPU_MAX_TAPS
    x = to_device(random_array(rng, (45, 50), dtype))
    for footprint in (fp, disk):
        for mode in ("reflect", "constant", "wrap"):
            check_exact(name, x, footprint=footprint, mode=mode, cval=1)


@pytest.mark.parametrize("name", ["minimum_filter", "maximum_filter", "median_filter"])
def test_box_form_nan_matches_scipy(name, rng):
    # Tap order matters for NaN: min/max keep the first tap's NaN only.
    host = random_array(rng, (35, 36), np.float64)
    host[rng.random(host.shape) < 0.01] = np.nan
    fp = np.ones((23, 23), bool)
    fp[0, 5] = fp[22, 3] = False
    got = getattr(gnd, name)(to_device(host), footprint=fp, mode="nearest")
    want = getattr(snd, name)(host, footprint=fp, mode="nearest")
    if name == "median_filter":  # NaN order is unspecified: compare where scipy's window has none
        clean = snd.maximum_filter(np.isnan(host).astype(np.uint8), footprint=fp, mode="nearest") == 0
        np.testing.assert_array_equal(cupy.asnumpy(got)[clean], want[clean])
    else:
        np.testing.assert_array_equal(cupy.asnumpy(got), want)


@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8"])
@pytest.mark.parametrize("name", ["correlate", "convolve"])
def test_box_form_31x31_random_weights_match_scipy(name, dtype, rng):
    w = rng.random((31, 31)) + 0.1  # 961 taps
    if np.dtype(dtype).kind == "u":
        w /= w.sum()
    x = to_device(random_array(rng, (48, 52), dtype))
    for mode in ("reflect", "constant", "wrap"):
        check_cupy(name, x, w, mode=mode, cval=2.5)
    check_cupy(name, x, w, origin=(-7, 3))


def test_box_form_footprint_along_five_axes_matches_scipy(rng):
    # <= 512 taps, but more axes than the tap table spans.
    x = to_device(random_array(rng, (5, 6, 4, 5, 6), np.float32))
    fp = rng.random((3, 3, 2, 3, 3)) < 0.7
    fp.flat[0] = True
    taps = int(np.count_nonzero(fp))
    check_cupy("correlate", x, signed_weights(rng, fp.shape) * fp, mode="mirror")
    check_exact("minimum_filter", x, footprint=fp, mode="reflect")
    check_exact("rank_filter", x, taps // 2, footprint=fp, mode="constant", cval=0.5)


def test_box_form_9x9x9_footprint_matches_scipy(rng):
    x = to_device(random_array(rng, (14, 15, 16), np.int16))
    check_exact("median_filter", x, size=9, mode="reflect")
    fp = np.ones((9, 9, 9), bool)
    fp[4, 4, 4] = False
    check_exact("maximum_filter", x, footprint=fp)


@pytest.mark.parametrize("name", ["correlate", "convolve"])
def test_box_form_too_many_weights_raises_value_error(name, rng):
    # 70 x 70 = 4900 nonzero weights: more than fit in the kernel parameters.
    x = to_device(random_array(rng, (80, 81), np.float32))
    out = to_device(random_array(rng, (80, 81), np.float32))
    host_x, host_out = cupy.asnumpy(x), cupy.asnumpy(out)
    w = rng.random((70, 70)) + 0.5
    with pytest.raises(ValueError, match="4900 nonzero elements.*at most"):
        getattr(gnd, name)(x, w, output=out)
    np.testing.assert_array_equal(cupy.asnumpy(x), host_x)
    np.testing.assert_array_equal(cupy.asnumpy(out), host_out)
    # The same weights on the host: no limit.
    assert_matches(getattr(gnd, name)(host_x, w), getattr(snd, name)(host_x, w))


def test_box_form_huge_sparse_footprint_matches_scipy(rng):
    # A 2 x 1001 footprint: the box has 2002 cells, 64 words of bits.
    fp = np.zeros((2, 1001), bool)
    fp[0, ::3] = fp[1, ::7] = True
    x = to_device(random_array(rng, (5, 1200), np.float32))
    check_exact("median_filter", x, footprint=fp, mode="wrap")
    check_exact("minimum_filter", x, footprint=fp, mode="reflect")
