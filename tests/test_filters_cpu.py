"""Parity of gpufilt.ndimage's CPU filters with scipy.ndimage.

Random data, never zeros; scipy is the oracle, with DESIGN.md's tolerances
(_helpers.assert_matches). Each test varies one or two things (dtype, mode,
origin, layout, output form...) around otherwise ordinary parameters, so that
a failure names what broke.
"""
from __future__ import annotations

import numpy as np
import pytest

from gpufilt import ndimage as gnd

from _helpers import (ALL_DTYPES, COMPLEX_DTYPES, FLOAT_DTYPES, INT_DTYPES, MODES,
                      assert_matches, random_array, scipy_reference, weights_for)

# Every copy of the CPU kernels (baseline, AVX2, AVX-512: conftest.cpu_isa).
pytestmark = pytest.mark.usefixtures("cpu_isa")

FUNCTIONS = ["correlate1d", "convolve1d", "gaussian_filter1d", "gaussian_filter",
             "uniform_filter1d", "uniform_filter"]


def filter_args(name, rng, dtype, ndim):
    """Ordinary positional and keyword arguments of filter `name` for data of
    `dtype` and `ndim` dimensions (1-D filters run along axis 0)."""
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


def check(name, x, *args, **kwargs):
    """Runs gpufilt's and scipy's `name` on x; asserts the result is a new
    numpy array of scipy's dtype and values, and that x is untouched."""
    before = x.copy()
    got = getattr(gnd, name)(x, *args, **kwargs)
    want = scipy_reference(name, x, *args, **kwargs)
    assert type(got) is np.ndarray
    assert got.dtype == want.dtype, f"dtype {got.dtype}, scipy gives {want.dtype}"
    assert not np.shares_memory(got, x)
    assert_matches(got, want)
    np.testing.assert_array_equal(x, before, err_msg="the input was modified")
    return got


# ------------------------------------------------------------------ dtypes


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_dtype_matches_scipy(name, dtype, rng):
    x = random_array(rng, (7, 9), dtype)
    args, kwargs = filter_args(name, rng, dtype, x.ndim)
    check(name, x, *args, **kwargs)


@pytest.mark.parametrize("name", ["gaussian_filter", "uniform_filter", "correlate1d"])
def test_bool_input_with_float_output_matches_scipy(name, rng):
    x = random_array(rng, (6, 8), bool)
    args, kwargs = filter_args(name, rng, np.float64, x.ndim)
    check(name, x, *args, output=np.float64, **kwargs)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32"])
@pytest.mark.parametrize("name,args", [("gaussian_filter", (2.0,)), ("uniform_filter", (5,)),
                                       ("correlate1d", ([0.2, 0.5, 0.3],))])
def test_multithreaded_size_matches_scipy(name, args, dtype, rng):
    # Large enough (lines x length > 32768) for the OpenMP path.
    x = random_array(rng, (190, 230), dtype)
    check(name, x, *args)


# ------------------------------------------------------------------- modes


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_mode_matches_scipy(name, mode, rng):
    x = random_array(rng, (6, 11), np.float64)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    check(name, x, *args, mode=mode, **kwargs)


@pytest.mark.parametrize("cval", [-3.5, 0.0, 2.25, 1e3])
@pytest.mark.parametrize("mode", ["constant", "grid-constant"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cval_matches_scipy(name, mode, cval, rng):
    x = random_array(rng, (5, 8), np.float64)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    check(name, x, *args, mode=mode, cval=cval, **kwargs)


@pytest.mark.parametrize("dtype", ["uint8", "int32", "uint64", "float16", "float32"])
@pytest.mark.parametrize("name", ["gaussian_filter", "uniform_filter1d", "correlate1d"])
def test_cval_is_converted_like_scipy_for_each_dtype(name, dtype, rng):
    x = random_array(rng, (5, 8), dtype)
    args, kwargs = filter_args(name, rng, dtype, x.ndim)
    check(name, x, *args, mode="constant", cval=7.75, **kwargs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("name,args", [
    ("uniform_filter1d", (7,)),
    ("uniform_filter1d", (6,)),
    ("gaussian_filter1d", (2.0,)),  # radius 8: the extension repeats the line
    ("correlate1d", ([0.5, -1.0, 2.0, 0.25, 1.5, -0.75],)),
    ("convolve1d", ([0.5, -1.0, 2.0, 0.25, 1.5],)),
])
def test_line_shorter_than_filter_matches_scipy(name, args, n, mode, rng):
    x = random_array(rng, (3, n), np.float64)
    check(name, x, *args, axis=-1, mode=mode, cval=1.5)


@pytest.mark.parametrize("modes", [
    ["reflect", "constant", "wrap"],
    ["mirror", "nearest", "grid-wrap"],
    ("grid-constant", "grid-mirror", "reflect"),
])
@pytest.mark.parametrize("name", ["gaussian_filter", "uniform_filter"])
def test_per_axis_modes_match_scipy(name, modes, rng):
    x = random_array(rng, (5, 6, 7), np.float32)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    check(name, x, *args, mode=modes, cval=-2.0, **kwargs)


@pytest.mark.parametrize("name", ["gaussian_filter", "uniform_filter"])
def test_per_axis_modes_with_axes_subset_match_scipy(name, rng):
    x = random_array(rng, (5, 6, 7), np.float64)
    arg = 1.5 if name == "gaussian_filter" else 4
    check(name, x, arg, mode=["wrap", "constant"], cval=3.0, axes=(2, 0))


# ----------------------------------------------------------------- origins


def _valid_origins(taps):
    return [(taps, origin) for origin in range(-(taps // 2), (taps - 1) // 2 + 1)]


ORIGIN_CASES = [case for taps in range(1, 7) for case in _valid_origins(taps)]


@pytest.mark.parametrize("mode", ["reflect", "constant", "wrap"])
@pytest.mark.parametrize("size,origin", ORIGIN_CASES)
def test_uniform_filter1d_origin_matches_scipy(size, origin, mode, rng):
    x = random_array(rng, (4, 9), np.float64)
    check("uniform_filter1d", x, size, origin=origin, mode=mode, cval=0.5)


@pytest.mark.parametrize("name", ["correlate1d", "convolve1d"])
@pytest.mark.parametrize("taps,origin", ORIGIN_CASES)
def test_weights_origin_matches_scipy(name, taps, origin, rng):
    x = random_array(rng, (4, 9), np.float64)
    check(name, x, rng.standard_normal(taps), origin=origin, mode="nearest")


@pytest.mark.parametrize("size,origin", [
    ((3, 4, 5), (-1, 1, 2)),
    ((2, 5, 1), (-1, -2, 0)),
    ((4, 4, 6), 1),
    (5, (-2, 2, 0)),
])
def test_uniform_filter_per_axis_origin_matches_scipy(size, origin, rng):
    x = random_array(rng, (6, 7, 8), np.float32)
    check("uniform_filter", x, size, origin=origin)


# ---------------------------------------------------- gaussian parameters


@pytest.mark.parametrize("truncate", [0.1, 0.5, 1.0, 2.5, 4.0, 6.0])
@pytest.mark.parametrize("sigma", [0.3, 1.0, 2.7])
def test_gaussian_filter1d_truncate_matches_scipy(sigma, truncate, rng):
    x = random_array(rng, (3, 15), np.float64)
    check("gaussian_filter1d", x, sigma, truncate=truncate)


@pytest.mark.parametrize("radius", [0, 1, 3, 12])
@pytest.mark.parametrize("order", [0, 1, 2])
def test_gaussian_filter1d_radius_matches_scipy(radius, order, rng):
    x = random_array(rng, (3, 14), np.float64)
    check("gaussian_filter1d", x, 1.4, order=order, radius=radius)


@pytest.mark.parametrize("radius", [2, (0, 3), [4, 1]])
def test_gaussian_filter_radius_matches_scipy(radius, rng):
    x = random_array(rng, (9, 10), np.float64)
    check("gaussian_filter", x, (1.5, 2.0), radius=radius)


@pytest.mark.parametrize("sigma", [0, 0.0, (0.0, 1.2), (1.1, 0)])
def test_gaussian_filter_zero_sigma_matches_scipy(sigma, rng):
    x = random_array(rng, (8, 9), np.float32)
    check("gaussian_filter", x, sigma)


@pytest.mark.parametrize("mode", ["reflect", "constant", "mirror", "wrap"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
@pytest.mark.parametrize("order", [0, 1, 2, 3])
def test_gaussian_filter1d_order_matches_scipy(order, dtype, mode, rng):
    x = random_array(rng, (4, 17), dtype)
    check("gaussian_filter1d", x, 1.7, order=order, mode=mode, cval=0.5)


@pytest.mark.parametrize("order", [1, (0, 1), (2, 0), [3, 1], (1, 2, 3)])
def test_gaussian_filter_order_matches_scipy(order, rng):
    x = random_array(rng, (6, 7, 8), np.float64)
    if np.ndim(order) == 1 and len(order) == 2:
        check("gaussian_filter", x, (1.2, 0.9), order=order, axes=(0, 2))
    else:
        check("gaussian_filter", x, 1.2, order=order)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float16"])
@pytest.mark.parametrize("output", [np.float32, np.float64])
@pytest.mark.parametrize("name,order", [("gaussian_filter1d", 1), ("gaussian_filter", (2, 1))])
def test_gaussian_derivative_into_float_output_matches_scipy(name, order, dtype, output, rng):
    x = random_array(rng, (7, 12), dtype)
    check(name, x, 1.1, order=order, output=output)


# -------------------------------------------------------------------- axes


@pytest.mark.parametrize("axes", [None, (0,), (1,), (2,), (0, 2), (2, 0), (-1,), (-1, -3),
                                  [1, -1], (0, 1, 2), ()])
@pytest.mark.parametrize("name", ["gaussian_filter", "uniform_filter"])
def test_axes_match_scipy(name, axes, rng):
    x = random_array(rng, (5, 6, 7), np.float64)
    n = 3 if axes is None else len(axes)
    arg = [1.0, 1.5, 0.8][:n] if name == "gaussian_filter" else [3, 2, 4][:n]
    check(name, x, arg, axes=axes)


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -2, -4])
@pytest.mark.parametrize("name", ["correlate1d", "convolve1d", "gaussian_filter1d",
                                  "uniform_filter1d"])
def test_axis_of_1d_filter_matches_scipy(name, axis, rng):
    x = random_array(rng, (3, 4, 5, 6), np.float32)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    kwargs["axis"] = axis
    check(name, x, *args, **kwargs)


@pytest.mark.parametrize("axes", [(1,), (0, 1)])
def test_scalar_and_sequence_arguments_with_axes_match_scipy(axes, rng):
    x = random_array(rng, (5, 6, 7), np.float64)
    check("gaussian_filter", x, 1.3, order=1, axes=axes, mode="nearest")
    check("uniform_filter", x, 3, origin=-1, axes=axes, mode="mirror")


# ----------------------------------------------------------------- layouts


def make_layout(rng, shape, dtype, layout):
    """A random array of `shape` with the memory layout `layout`."""
    shape = tuple(shape)
    if layout == "C":
        return random_array(rng, shape, dtype)
    if layout == "F":
        return np.asfortranarray(random_array(rng, shape, dtype))
    if layout == "strided":  # every axis stepped, with an offset
        steps = [2 + i % 2 for i in range(len(shape))]
        base = random_array(rng, [s * k + 1 for s, k in zip(shape, steps)], dtype)
        return base[tuple(slice(1, 1 + s * k, k) for s, k in zip(shape, steps))]
    if layout == "negative":  # every axis reversed
        return random_array(rng, shape, dtype)[(slice(None, None, -1),) * len(shape)]
    if layout == "negative-strided":  # steps of -2 and 3 alternating
        steps = [-2 if i % 2 == 0 else 3 for i in range(len(shape))]
        base = random_array(rng, [s * abs(k) for s, k in zip(shape, steps)], dtype)
        return base[tuple(slice(None, None, k) for k in steps)]
    if layout == "transposed":
        return random_array(rng, shape[::-1], dtype).T
    if layout == "broadcast":  # a zero stride (read-only view)
        row = random_array(rng, shape[1:], dtype)
        return np.broadcast_to(row, shape)
    raise AssertionError(layout)


LAYOUTS = ["C", "F", "strided", "negative", "negative-strided", "transposed", "broadcast"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_input_layout_matches_scipy(name, layout, rng):
    x = make_layout(rng, (6, 7, 5), np.float32, layout)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    check(name, x, *args, **kwargs)


@pytest.mark.parametrize("layout", ["C", "F", "strided", "negative", "negative-strided", "transposed"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_output_layout_matches_scipy(name, layout, rng):
    x = random_array(rng, (6, 7, 5), np.float64)
    out = make_layout(rng, x.shape, np.float64, layout)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    result = getattr(gnd, name)(x, *args, output=out, **kwargs)
    assert result is out
    assert_matches(out, scipy_reference(name, x, *args, **kwargs))


@pytest.mark.parametrize("dtype", ["uint16", "float64", "complex64"])
def test_strided_input_and_output_of_other_dtype_match_scipy(dtype, rng):
    x = make_layout(rng, (8, 9), dtype, "negative-strided")
    out_dtype = np.complex128 if np.dtype(dtype).kind == "c" else np.float32
    out = make_layout(rng, x.shape, out_dtype, "strided")
    gnd.gaussian_filter(x, 1.2, output=out)
    assert_matches(out, scipy_reference("gaussian_filter", x, 1.2, output=out_dtype))


@pytest.mark.parametrize("shape", [(11,), (6, 7), (4, 5, 6), (3, 4, 5, 3), (2, 3, 4, 3, 4)])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_number_of_dimensions_matches_scipy(name, shape, rng):
    x = random_array(rng, shape, np.float64)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    if "axis" in kwargs:
        kwargs["axis"] = -1
    check(name, x, *args, **kwargs)


@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128"])
@pytest.mark.parametrize("name,args", [("gaussian_filter", (1.5,)), ("uniform_filter", (3,))])
def test_zero_dimensional_input_matches_scipy(name, args, dtype, rng):
    x = random_array(rng, (), dtype)
    got = check(name, x, *args)
    assert got.shape == ()


@pytest.mark.parametrize("shape", [(0,), (0, 5), (5, 0), (3, 0, 4)])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_empty_input_matches_scipy(name, shape, rng):
    x = np.empty(shape, np.float32)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    got = check(name, x, *args, **kwargs)
    assert got.shape == shape


@pytest.mark.parametrize("name", FUNCTIONS)
def test_empty_input_into_output_array_returns_it(name, rng):
    x = np.empty((4, 0), np.float64)
    out = np.empty((4, 0), np.float32)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    assert getattr(gnd, name)(x, *args, output=out, **kwargs) is out


# ------------------------------------------------------------------ output


@pytest.mark.parametrize("output", [np.float32, "float64", np.dtype("int32"), "uint16", np.float16,
                                    np.int64])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_output_dtype_matches_scipy(name, output, rng):
    x = (rng.random((6, 7)) * 200 + 1).astype(np.float64)  # positive: fits every output dtype
    args, kwargs = filter_args(name, rng, np.uint8, x.ndim)  # convex weights
    got = check(name, x, *args, output=output, **kwargs)
    assert got.dtype == np.dtype(output)


@pytest.mark.parametrize("out_dtype", ["float64", "float32", "uint8", "int16"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_output_array_is_written_and_returned(name, out_dtype, rng):
    x = (rng.random((6, 7)) * 100 + 1).astype(np.float32)
    out = random_array(rng, x.shape, out_dtype)
    args, kwargs = filter_args(name, rng, np.uint8, x.ndim)
    result = getattr(gnd, name)(x, *args, output=out, **kwargs)
    assert result is out
    assert_matches(out, scipy_reference(name, x, *args, output=out.dtype, **kwargs))


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float16", "float32", "float64", "complex128"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_in_place_matches_scipy_on_a_copy(name, dtype, rng):
    x = random_array(rng, (7, 8), dtype)
    args, kwargs = filter_args(name, rng, dtype, x.ndim)
    expected = scipy_reference(name, x, *args, **kwargs)
    assert getattr(gnd, name)(x, *args, output=x, **kwargs) is x
    assert_matches(x, expected)


@pytest.mark.parametrize("layout", ["F", "strided", "negative", "transposed"])
@pytest.mark.parametrize("name", ["gaussian_filter", "uniform_filter", "correlate1d"])
def test_in_place_on_a_view_matches_scipy_on_a_copy(name, layout, rng):
    x = make_layout(rng, (6, 7, 5), np.float64, layout)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    expected = scipy_reference(name, x, *args, **kwargs)
    assert getattr(gnd, name)(x, *args, output=x, **kwargs) is x
    assert_matches(x, expected)


def _overlapping_pairs(rng):
    """(input, output) views of one buffer that overlap without being the same."""
    flat = random_array(rng, (40,), np.float64)
    square = random_array(rng, (7, 7), np.float64)
    grid = random_array(rng, (8, 9), np.float64)
    cube = random_array(rng, (4, 6, 6), np.float64)
    return {
        "shifted-right": (flat[:37], flat[3:]),
        "shifted-left": (flat[3:], flat[:37]),
        "reversed": (flat, flat[::-1]),
        "interleaved": (flat[:20], flat[1:40:2][:20]),
        "transposed": (square, square.T),
        "rows-shifted": (grid[:-1], grid[1:]),
        "columns-shifted": (grid[:, 2:], grid[:, :-2]),
        "swapped-axes": (cube, cube.transpose(0, 2, 1)),
    }


OVERLAPS = list(_overlapping_pairs(np.random.default_rng(0)))


@pytest.mark.parametrize("overlap", OVERLAPS)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_overlapping_output_matches_scipy_on_a_copy(name, overlap, rng):
    x, out = _overlapping_pairs(rng)[overlap]
    assert np.shares_memory(x, out)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    if "axis" in kwargs:
        kwargs["axis"] = -1
    expected = scipy_reference(name, x, *args, **kwargs)
    assert getattr(gnd, name)(x, *args, output=out, **kwargs) is out
    assert_matches(out, expected)


def test_overlapping_output_of_other_dtype_matches_scipy_on_a_copy(rng):
    buf = random_array(rng, (64,), np.float64)
    x = buf[:40]
    out = buf.view(np.float32)[30:70]  # bytes 120..280 of x's 0..320
    assert np.shares_memory(x, out)
    expected = scipy_reference("gaussian_filter", x, 2.0, output=np.float32)
    assert gnd.gaussian_filter(x, 2.0, output=out) is out
    assert_matches(out, expected)


# ------------------------------------------------------------------ complex


@pytest.mark.parametrize("mode", ["constant", "grid-constant"])
@pytest.mark.parametrize("dtype", COMPLEX_DTYPES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_complex_cval_matches_scipy(name, dtype, mode, rng):
    x = random_array(rng, (5, 8), dtype)
    args, kwargs = filter_args(name, rng, dtype, x.ndim)
    check(name, x, *args, mode=mode, cval=1.5 - 2.5j, **kwargs)


# scipy's gaussian_filter refuses a real output dtype for complex input
# (RuntimeError) where gaussian_filter1d promotes it; gpufilt promotes in both.
@pytest.mark.parametrize("output", [np.float32, np.float64, "int16"])
@pytest.mark.parametrize("name", ["gaussian_filter1d", "uniform_filter", "uniform_filter1d",
                                  "correlate1d", "convolve1d"])
def test_complex_input_promotes_real_output_dtype_with_scipy_warning(name, output, rng):
    x = random_array(rng, (5, 6), np.complex64)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    with pytest.warns(UserWarning, match="promoting specified output dtype to complex"):
        want = scipy_reference(name, x, *args, output=output, **kwargs)
    with pytest.warns(UserWarning, match="promoting specified output dtype to complex"):
        got = getattr(gnd, name)(x, *args, output=output, **kwargs)
    assert got.dtype == want.dtype
    assert_matches(got, want)


def test_complex_gaussian_filter_promotes_real_output_dtype_like_gaussian_filter1d(rng):
    x = random_array(rng, (5, 6), np.complex128)
    with pytest.warns(UserWarning, match="promoting specified output dtype to complex"):
        got = gnd.gaussian_filter(x, 1.1, output=np.float32)
    assert got.dtype == np.complex64
    assert_matches(got, scipy_reference("gaussian_filter", x, 1.1, output=np.complex64))


@pytest.mark.parametrize("in_dtype,out_dtype", [("complex64", "complex128"),
                                                ("complex128", "complex64")])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_complex_output_array_matches_scipy(name, in_dtype, out_dtype, rng):
    x = random_array(rng, (6, 5), in_dtype)
    out = random_array(rng, x.shape, out_dtype)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    assert getattr(gnd, name)(x, *args, output=out, **kwargs) is out
    assert_matches(out, scipy_reference(name, x, *args, output=out.dtype, **kwargs))


@pytest.mark.parametrize("mode", ["reflect", "constant", "wrap"])
@pytest.mark.parametrize("dtype", ["int16", "float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("name", ["correlate1d", "convolve1d"])
def test_complex_weights_match_scipy(name, dtype, mode, rng):
    x = random_array(rng, (5, 9), dtype)
    if x.dtype.kind == "i":
        x = x // 256  # small values: complex results stay well within float64 precision
    w = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    cval = 0.5 - 1.5j if x.dtype.kind == "c" else 0.5
    check(name, x, w, axis=-1, mode=mode, cval=cval, origin=1)


@pytest.mark.parametrize("name", ["correlate1d", "convolve1d"])
def test_complex_weights_in_place_match_scipy_on_a_copy(name, rng):
    x = random_array(rng, (6, 7), np.complex128)
    w = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    expected = scipy_reference(name, x, w, axis=0)
    assert getattr(gnd, name)(x, w, axis=0, output=x) is x
    assert_matches(x, expected)


@pytest.mark.parametrize("name", ["correlate1d", "convolve1d"])
def test_complex_weights_into_overlapping_output_match_scipy_on_a_copy(name, rng):
    buf = random_array(rng, (30,), np.complex128)
    x, out = buf[:26], buf[4:]
    w = rng.standard_normal(5) + 1j * rng.standard_normal(5)
    expected = scipy_reference(name, x, w)
    assert getattr(gnd, name)(x, w, output=out) is out
    assert_matches(out, expected)


@pytest.mark.parametrize("output", [np.complex64, "complex128"])
@pytest.mark.parametrize("name", ["correlate1d", "convolve1d"])
def test_complex_weights_output_dtype_matches_scipy(name, output, rng):
    x = random_array(rng, (5, 8), np.float64)
    w = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    got = check(name, x, w, output=output)
    assert got.dtype == np.dtype(output)


@pytest.mark.parametrize("name", ["correlate1d", "convolve1d"])
def test_complex_weights_promote_real_output_dtype_with_scipy_warning(name, rng):
    x = random_array(rng, (5, 8), np.float32)
    w = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    with pytest.warns(UserWarning, match="promoting specified output dtype to complex"):
        want = scipy_reference(name, x, w, output=np.float32)
    with pytest.warns(UserWarning, match="promoting specified output dtype to complex"):
        got = getattr(gnd, name)(x, w, output=np.float32)
    assert got.dtype == want.dtype
    assert_matches(got, want)


# ------------------------------------------------------------- integer data


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", ["gaussian_filter", "uniform_filter", "uniform_filter1d",
                                  "correlate1d"])
def test_integer_extremes_stay_within_one_unit_of_scipy(name, dtype, rng):
    # Values at both ends of the range: truncation of the weighted sums must
    # follow scipy's (toward zero), without wrapping around.
    info = np.iinfo(dtype)
    lo, hi = (info.min, info.max) if info.bits < 64 else (info.min // 2 ** 20, info.max // 2 ** 20)
    x = rng.choice(np.array([lo, hi, lo + 1, hi - 1, 0], dtype=dtype), size=(6, 9))
    args, kwargs = filter_args(name, rng, dtype, x.ndim)
    check(name, x, *args, mode="nearest", **kwargs)


# A flat image keeps its value only if the taps are summed as scipy sums them
# (symmetric pairs first): in plain order the weights add up to just below 1
# and truncation loses one unit per axis.
@pytest.mark.parametrize("sigma", [0.5, 1.3, 3.0])
@pytest.mark.parametrize("ndim", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "int32", "uint64"])
def test_flat_integer_image_stays_within_one_unit_of_scipy(dtype, ndim, sigma):
    x = np.full((9,) * ndim, 17, dtype)
    check("gaussian_filter", x, sigma)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_non_finite_values_spread_like_scipy(dtype, rng):
    x = random_array(rng, (5, 9), dtype)
    x[1, 3], x[3, 7] = np.inf, np.nan
    with np.errstate(invalid="ignore"):
        want = scipy_reference("gaussian_filter1d", x, 1.0)
        got = gnd.gaussian_filter1d(x, 1.0)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    assert_matches(got[finite], want[finite], dtype=dtype)


@pytest.mark.parametrize("size", [3, 32, 33])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_float_sums_of_long_lines_match_scipy(dtype, size, rng):
    # float32/float16 data are summed in float: windows of up to 32 taps
    # whole at every output, longer ones by a running sum in double; along
    # the contiguous axis (one line at a time) and across it (lines in blocks).
    x = random_array(rng, (3000, 5), dtype) + 100  # an offset: rounding errors show
    for axis in (0, 1):
        assert_matches(gnd.uniform_filter1d(x, size, axis=axis),
                       scipy_reference("uniform_filter1d", x, size, axis=axis), dtype=dtype)
        assert_matches(gnd.gaussian_filter1d(x, size / 8, axis=axis),
                       scipy_reference("gaussian_filter1d", x, size / 8, axis=axis), dtype=dtype)


@pytest.mark.parametrize("output", ["uint8", "int8", "uint16", "int16"])
def test_narrow_integer_outputs_wrap_as_scipy(output, rng):
    # 8/16-bit outputs of lines that int32 holds take a vectorised
    # conversion; a line with NaN takes the scalar one. Both must give
    # scipy's wrapped values. (Results beyond int32 are left out: scipy's C
    # cast goes through int32 there, gpufilt's through int64.)
    x = rng.uniform(-70000, 70000, size=(6, 40))
    x[2, 7] = 2e9
    x[5, 1] = np.nan
    for axis in (0, 1):
        got = gnd.correlate1d(x, [0.25, 0.5, 0.25], axis=axis, output=np.dtype(output))
        want = scipy_reference("correlate1d", x, [0.25, 0.5, 0.25], axis=axis, output=np.dtype(output))
        np.testing.assert_array_equal(got, want)


# Means of integer data whose window sums are exact (integers below 2^24 in
# float, 2^53 in double) run as vectorised running sums, in any order of
# addition; 8- and 16-bit means and extremes into integer outputs run on the
# float kernels. Both must give scipy's results to the bit, not only within
# one unit: along the contiguous axis (two chunks a line) and across it,
# windows summed tap by tap and running, the largest uint16 and int16
# windows whose means the float kernels take and the next (in double), flat
# runs whose means are exact integers, every mode, cval at the dtype's ends
# and between two integers (no value of the dtype: sums in scipy's order).
@pytest.mark.parametrize("size", [2, 3, 7, 9, 23, 24, 31, 33, 64, 256, 257, 511, 512, 1500])
@pytest.mark.parametrize("dtype,output", [("uint8", None), ("int8", None), ("uint16", None), ("int16", None),
                                          ("uint8", "int16"), ("int8", "int32"), ("uint16", "uint64"),
                                          ("int32", None), ("uint32", None), ("uint16", "float32"),
                                          ("int16", "float64")])
def test_integer_means_and_extremes_match_scipy_to_the_bit(dtype, output, size, rng):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size=(40, 1200), endpoint=True, dtype=dtype)
    x[:7, :300] = info.max
    x[7:11, 500:] = info.min
    out = np.dtype(output) if output else None
    for name in ("uniform_filter1d", "minimum_filter1d", "maximum_filter1d"):
        for axis in (0, 1):
            for mode in MODES:
                for cval in ([info.min, info.max, 0.5] if mode == "constant" else [0.0]):
                    got = getattr(gnd, name)(x, size, axis=axis, mode=mode, cval=cval, output=out)
                    want = scipy_reference(name, x, size, axis=axis, mode=mode, cval=cval, output=out)
                    np.testing.assert_array_equal(got, want, err_msg=f"{name} axis {axis} mode {mode} cval {cval}")
