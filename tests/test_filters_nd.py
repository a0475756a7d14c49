"""Parity of gpufilt.ndimage's N-D filters with scipy.ndimage (CPU).

Covers correlate, convolve, the minimum/maximum (1-D and N-D), median, rank
and percentile filters, sobel, prewitt, laplace, gaussian_laplace,
gaussian_gradient_magnitude, generic_laplace and generic_gradient_magnitude,
then the bad inputs of these functions.

Random data, never zeros; scipy is the oracle with DESIGN.md's tolerances
(_helpers.assert_matches). Each test varies one or two things (dtype, mode,
origin, footprint, layout, output form...) around otherwise ordinary
parameters, so that a failure names what broke. Data fed to the derivative
filters is kept small for integer dtypes (no overflow, whose C cast is
undefined) and unsigned data goes into signed or float outputs there (the
derivatives are negative). min/max/rank tests use no NaN: scipy's NaN order
is implementation-defined.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage as snd

import gpufilt
from gpufilt import ndimage as gnd

from _helpers import (COMPLEX_DTYPES, FLOAT_DTYPES, INT_DTYPES, MODES, assert_matches,
                      random_array, scipy_reference)
from test_errors import untouched
from test_filters_cpu import LAYOUTS, OVERLAPS, _overlapping_pairs, make_layout

# Every copy of the CPU kernels (baseline, AVX2, AVX-512: conftest.cpu_isa).
pytestmark = pytest.mark.usefixtures("cpu_isa")

REAL_DTYPES = INT_DTYPES + FLOAT_DTYPES

WEIGHTED = ["correlate", "convolve"]
ORDER_STATS = ["minimum_filter", "maximum_filter", "median_filter", "rank_filter",
               "percentile_filter"]
ONE_D = ["minimum_filter1d", "maximum_filter1d"]
FOOTPRINT_FILTERS = WEIGHTED + ORDER_STATS
DERIVATIVES = ["sobel", "prewitt", "laplace", "gaussian_laplace", "gaussian_gradient_magnitude",
               "generic_laplace", "generic_gradient_magnitude"]
FUNCTIONS = WEIGHTED + ONE_D + ORDER_STATS + DERIVATIVES
REAL_ONLY = ONE_D + ORDER_STATS  # complex input raises TypeError


# ------------------------------------------------- derivative callbacks
#
# generic_laplace / generic_gradient_magnitude take Python functions. The
# gpufilt side gets functions that call gpufilt's own filters; scipy gets the
# same functions calling scipy's. `Derivative("name")` in an argument list
# stands for "this function, from the library being called".


def _second_difference(lib):
    def derivative2(input, axis, output, mode, cval, weights, scale=1.0, origin=0):
        w = np.asarray(weights, dtype=np.float64) * scale
        return lib.correlate1d(input, w, axis, output, mode, cval, origin)
    return derivative2


def _sobel_derivative(lib):
    # scipy's documented generic_gradient_magnitude example: sobel as derivative.
    def derivative(input, axis, output, mode, cval, *args, **kwargs):
        assert args == () and kwargs == {}
        return lib.sobel(input, axis, output, mode, cval)
    return derivative


def _scaled_sobel(lib):
    def derivative(input, axis, output, mode, cval, scale, offset_weight=0.0):
        return lib.correlate1d(lib.sobel(input, axis, np.float64, mode, cval),
                               [offset_weight, scale, 0.0], axis, output, "nearest")
    return derivative


DERIVATIVE_FACTORIES = {"second_difference": _second_difference, "sobel": _sobel_derivative,
                        "scaled_sobel": _scaled_sobel}


class Derivative:
    """Placeholder for a derivative callback; resolved per library."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Derivative({self.name!r})"


def _resolve(value, lib):
    if isinstance(value, Derivative):
        return DERIVATIVE_FACTORIES[value.name](lib)
    return value


def call(lib, name, x, *args, **kwargs):
    """lib.<name>(x, ...) with derivative placeholders resolved for lib."""
    args = [_resolve(a, lib) for a in args]
    kwargs = {k: _resolve(v, lib) for k, v in kwargs.items()}
    return getattr(lib, name)(x, *args, **kwargs)


def reference(name, x, *args, output=None, **kwargs):
    """scipy's result on a copy of x (float16 computed in float32, rounded)."""
    args = [_resolve(a, snd) for a in args]
    kwargs = {k: _resolve(v, snd) for k, v in kwargs.items()}
    return scipy_reference(name, x, *args, output=output, **kwargs)


# ------------------------------------------------------------------ data


def data(rng, shape, dtype, name=None):
    """Random data for filter `name`: small integers for the derivatives
    (their sums and squares stay within int8), the full range otherwise."""
    dtype = np.dtype(dtype)
    if name in DERIVATIVES and dtype.kind in "iu":
        # Gradient magnitudes square the derivatives in the output dtype.
        hi = 1 if "gradient_magnitude" in name else 6
        lo = 0 if dtype.kind == "u" else -hi
        x = rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)
        if x.size and not x.any():
            x.flat[0] = 3
        return x
    return random_array(rng, shape, dtype)


def convex_weights(rng, shape):
    """Non-negative weights summing to one (with a zero inside when large
    enough): integer results stay within range."""
    w = rng.random(shape) + 0.05
    if w.size > 2:
        w.flat[w.size // 2 - 1] = 0.0
    return w / w.sum()


def signed_weights(rng, shape):
    w = rng.standard_normal(shape)
    if w.size > 2:
        w.flat[1] = 0.0
    return w


def weights_for(rng, dtype, shape):
    """Convex weights for integers (and bool), signed ones for floats and complex."""
    if np.dtype(dtype).kind in "biu":
        return convex_weights(rng, shape)
    return signed_weights(rng, shape)


def cross(ndim, size=3):
    """A cross-shaped (non-box) footprint of `ndim` dimensions."""
    f = np.zeros((size,) * ndim, bool)
    for ax in range(ndim):
        idx = [size // 2] * ndim
        idx[ax] = slice(None)
        f[tuple(idx)] = True
    return f


def filter_args(name, rng, dtype, ndim):
    """Ordinary positional and keyword arguments of filter `name` for data of
    `dtype` with `ndim` dimensions."""
    if name in WEIGHTED:
        return (weights_for(rng, dtype, [3, 2, 3, 2][:ndim]),), {}
    if name in ONE_D:
        return (3 if name == "minimum_filter1d" else 4,), {"axis": 0}
    if name == "minimum_filter":
        return (), {"size": [3, 2, 4, 3][:ndim]}
    if name == "maximum_filter":
        return (), {"footprint": cross(ndim)}
    if name == "median_filter":
        return (), {"size": [3, 4, 3, 2][:ndim]}
    if name == "rank_filter":
        return (-3,), {"size": [3, 2, 3, 2][:ndim]}
    if name == "percentile_filter":
        f = np.ones([3, 4, 2, 3][:ndim], bool)
        f.flat[::3] = False
        return (35,), {"footprint": f}
    if name == "sobel":
        return (), {"axis": 0}
    if name == "prewitt":
        return (), {"axis": -1}
    if name == "laplace":
        return (), {}
    if name == "gaussian_laplace":
        return ([1.1, 0.8, 1.3, 0.7][:ndim],), {}
    if name == "gaussian_gradient_magnitude":
        return (0.9,), {}
    if name == "generic_laplace":
        return (Derivative("second_difference"),), {"extra_arguments": ([1.0, -2.0, 1.0],)}
    if name == "generic_gradient_magnitude":
        return (Derivative("sobel"),), {}
    raise AssertionError(name)


def needs_signed_output(name, dtype):
    """Derivative filters of unsigned data are negative: scipy's C cast into
    an unsigned output is undefined, so those go to a signed output."""
    return name in DERIVATIVES and np.dtype(dtype).kind == "u"


def check(name, x, *args, **kwargs):
    """Runs gpufilt's and scipy's `name` on x; asserts the result is a new
    numpy array of scipy's dtype and values, and that x is untouched."""
    before = x.copy()
    got = call(gnd, name, x, *args, **kwargs)
    want = reference(name, x, *args, **kwargs)
    assert type(got) is np.ndarray
    assert got.dtype == want.dtype, f"dtype {got.dtype}, scipy gives {want.dtype}"
    assert not np.shares_memory(got, x)
    assert_matches(got, want, err_msg=f"{name}")
    np.testing.assert_array_equal(x, before, err_msg="the input was modified")
    return got


def check_default(name, x, rng, **overrides):
    """check() with filter_args' ordinary arguments, `overrides` replacing keywords."""
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    kwargs.update(overrides)
    if needs_signed_output(name, x.dtype) and "output" not in kwargs:
        kwargs["output"] = np.int32
    return check(name, x, *args, **kwargs)


# ------------------------------------------------------------------ dtypes


@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_dtype_matches_scipy(name, dtype, rng):
    x = data(rng, (6, 7), dtype, name)
    check_default(name, x, rng)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
@pytest.mark.parametrize("name", DERIVATIVES)
def test_unsigned_input_into_float_output_matches_scipy(name, dtype, rng):
    x = data(rng, (5, 8), dtype, name)
    got = check_default(name, x, rng, output=np.float64)
    assert got.dtype == np.float64


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
@pytest.mark.parametrize("name", ["sobel", "prewitt", "laplace"])
def test_signed_integer_derivatives_keep_sign_like_scipy(name, dtype, rng):
    x = data(rng, (7, 6), dtype, name)
    got = check_default(name, x, rng, mode="nearest")
    assert (got < 0).any()  # the test exercises negative results


@pytest.mark.parametrize("dtype", COMPLEX_DTYPES)
@pytest.mark.parametrize("name", WEIGHTED)
def test_complex_input_matches_scipy(name, dtype, rng):
    x = random_array(rng, (6, 7), dtype)
    check(name, x, rng.standard_normal((3, 4)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("name", WEIGHTED)
def test_complex_weights_match_scipy(name, dtype, rng):
    x = random_array(rng, (6, 7), dtype)
    w = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))
    w[1, 0] = 0.0
    got = check(name, x, w, mode="reflect")
    assert got.dtype.kind == "c"


@pytest.mark.parametrize("mode", ["constant", "grid-constant", "wrap"])
@pytest.mark.parametrize("dtype", COMPLEX_DTYPES)
@pytest.mark.parametrize("name", WEIGHTED)
def test_complex_weights_and_complex_cval_match_scipy(name, dtype, mode, rng):
    x = random_array(rng, (5, 6), dtype)
    w = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    check(name, x, w, mode=mode, cval=0.75 - 2.5j, origin=(0, -1))


@pytest.mark.parametrize("name", WEIGHTED)
def test_complex_weights_on_integer_input_match_scipy(name, rng):
    x = rng.integers(-50, 50, size=(6, 5)).astype(np.int16)
    w = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    check(name, x, w, mode="constant", cval=2.0)


@pytest.mark.parametrize("mode", ["constant", "grid-constant"])
@pytest.mark.parametrize("dtype", COMPLEX_DTYPES)
@pytest.mark.parametrize("name", WEIGHTED)
def test_complex_cval_with_real_weights_matches_scipy(name, dtype, mode, rng):
    x = random_array(rng, (5, 8), dtype)
    check(name, x, rng.standard_normal((3, 3)), mode=mode, cval=-1.5 + 3j)


@pytest.mark.parametrize("output", [np.complex64, "complex128"])
@pytest.mark.parametrize("name", WEIGHTED)
def test_complex_weights_output_dtype_matches_scipy(name, output, rng):
    x = random_array(rng, (5, 6), np.float32)
    w = rng.standard_normal((2, 2)) + 1j * rng.standard_normal((2, 2))
    got = check(name, x, w, output=output)
    assert got.dtype == np.dtype(output)


@pytest.mark.parametrize("name", WEIGHTED)
def test_complex_weights_promote_real_output_dtype_with_scipy_warning(name, rng):
    x = random_array(rng, (5, 6), np.float64)
    w = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))
    with pytest.warns(UserWarning, match="promoting specified output dtype to complex"):
        want = scipy_reference(name, x, w, output=np.float32)
    with pytest.warns(UserWarning, match="promoting specified output dtype to complex"):
        got = getattr(gnd, name)(x, w, output=np.float32)
    assert got.dtype == want.dtype
    assert_matches(got, want)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", ORDER_STATS + ONE_D)
def test_integer_extremes_match_scipy_exactly_for_order_statistics(name, dtype, rng):
    # Equal to scipy's values exactly, also for 64-bit extremes that a double
    # cannot hold (scipy's N-D filters compare and convert them as doubles).
    info = np.iinfo(dtype)
    x = rng.choice(np.array([info.min, info.max, info.min + 1, info.max - 1, 0], dtype=dtype),
                   size=(6, 7))
    args, kwargs = filter_args(name, rng, dtype, x.ndim)
    got = getattr(gnd, name)(x, *args, mode="nearest", **kwargs)
    want = getattr(snd, name)(x, *args, mode="nearest", **kwargs)
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------- modes


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_mode_matches_scipy(name, mode, rng):
    x = data(rng, (6, 7), np.float64, name)
    check_default(name, x, rng, mode=mode, cval=1.25)


@pytest.mark.parametrize("cval", [-3.5, 0.0, 2.25, 1e3])
@pytest.mark.parametrize("mode", ["constant", "grid-constant"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cval_matches_scipy(name, mode, cval, rng):
    x = data(rng, (5, 6), np.float64, name)
    check_default(name, x, rng, mode=mode, cval=cval)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint32", "int64", "float16", "float32"])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS + ONE_D)
def test_cval_is_converted_like_scipy_for_each_dtype(name, dtype, rng):
    # A fractional cval with integer data: converted where scipy converts it.
    if np.dtype(dtype).kind in "iu":  # values near cval, so that it matters
        x = rng.integers(1, 16, size=(5, 7)).astype(dtype)
    else:
        x = random_array(rng, (5, 7), dtype)
    check_default(name, x, rng, mode="constant", cval=7.75)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS + ONE_D + ["sobel", "gaussian_laplace"])
def test_line_shorter_than_footprint_matches_scipy(name, n, mode, rng):
    # Footprints of 7 (even: 6 for the 1-D filters) along the short last axis.
    x = data(rng, (3, n), np.float64, name)
    kwargs = {"mode": mode, "cval": -0.5}
    if name in WEIGHTED:
        check(name, x, signed_weights(rng, (2, 7)), **kwargs)
    elif name in ONE_D:
        check(name, x, 6, axis=-1, **kwargs)
    elif name == "rank_filter":
        check(name, x, 4, size=(1, 7), **kwargs)
    elif name == "percentile_filter":
        check(name, x, 60, footprint=[[1, 0, 1, 1, 0, 1, 1]], **kwargs)
    elif name in ORDER_STATS:
        check(name, x, footprint=np.ones((2, 7), bool), **kwargs)
    elif name == "sobel":
        check(name, x, axis=-1, **kwargs)
    else:
        check(name, x, 3.0, **kwargs)


# -------------------------------------------------------- per-axis modes


MODE_SEQUENCES = [
    ["reflect", "constant", "wrap"],
    ["mirror", "nearest", "grid-wrap"],
    ("grid-constant", "grid-mirror", "reflect"),
]


@pytest.mark.parametrize("modes", MODE_SEQUENCES)
@pytest.mark.parametrize("name", ["minimum_filter", "maximum_filter"])
def test_per_axis_modes_with_box_size_match_scipy(name, modes, rng):
    x = random_array(rng, (5, 6, 7), np.float32)
    check(name, x, size=(3, 2, 4), mode=modes, cval=-2.0)


@pytest.mark.parametrize("modes", MODE_SEQUENCES)
@pytest.mark.parametrize("name", ["minimum_filter", "maximum_filter"])
def test_per_axis_modes_with_box_footprint_match_scipy(name, modes, rng):
    x = random_array(rng, (5, 6, 7), np.float64)
    check(name, x, footprint=np.ones((2, 3, 3), bool), mode=modes, cval=9.0, origin=(0, 1, -1))


@pytest.mark.parametrize("name", ["minimum_filter", "maximum_filter"])
def test_per_axis_modes_with_axes_subset_match_scipy(name, rng):
    x = random_array(rng, (5, 6, 7), np.float64)
    check(name, x, size=(4, 3), mode=["wrap", "constant"], cval=3.0, axes=(2, 0))


@pytest.mark.parametrize("rank", [0, -1])
def test_rank_filter_at_extreme_rank_takes_per_axis_modes_like_scipy(rank, rng):
    # rank 0 / -1 is the minimum / maximum filter in scipy, which then accepts
    # a sequence of modes for a box footprint.
    x = random_array(rng, (5, 6, 7), np.float64)
    check("rank_filter", x, rank, size=(3, 3, 2), mode=["constant", "mirror", "wrap"], cval=-7.0)
    check("rank_filter", x, rank, size=(3, 2), mode=["nearest", "constant"], cval=5.0, axes=(0, 2))


@pytest.mark.parametrize("modes", MODE_SEQUENCES)
@pytest.mark.parametrize("name", ["sobel", "prewitt", "laplace", "gaussian_laplace",
                                  "gaussian_gradient_magnitude", "generic_laplace",
                                  "generic_gradient_magnitude"])
def test_per_axis_modes_of_derivatives_match_scipy(name, modes, rng):
    x = data(rng, (5, 6, 7), np.float64, name)
    check_default(name, x, rng, mode=modes, cval=1.5)


# ----------------------------------------------------------------- origins


def _extreme_origins(shape):
    """Per-axis origins at both ends of the valid range, and mixes of them."""
    lo = [-(n // 2) for n in shape]
    hi = [(n - 1) // 2 for n in shape]
    mixed = [lo[i] if i % 2 == 0 else hi[i] for i in range(len(shape))]
    return [tuple(lo), tuple(hi), tuple(mixed)]


ORIGIN_SHAPES = [(3, 4), (2, 5), (4, 4), (1, 6), (5, 2)]
ORIGIN_CASES = [(shape, origin) for shape in ORIGIN_SHAPES for origin in _extreme_origins(shape)]


@pytest.mark.parametrize("shape,origin", ORIGIN_CASES)
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_extreme_origins_match_scipy(name, shape, origin, rng):
    x = random_array(rng, (7, 9), np.float64)
    footprint = rng.random(shape) < 0.7
    footprint.flat[0] = True  # never all-zero
    kwargs = {"origin": origin, "mode": "constant", "cval": 0.5}
    if name in WEIGHTED:
        check(name, x, signed_weights(rng, shape), **kwargs)
    elif name == "rank_filter":
        check(name, x, -2 if footprint.sum() > 1 else 0, footprint=footprint, **kwargs)
    elif name == "percentile_filter":
        check(name, x, 70, footprint=footprint, **kwargs)
    else:
        check(name, x, footprint=footprint, **kwargs)


@pytest.mark.parametrize("origin", [-2, -1, 0, 1])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_scalar_origin_matches_scipy(name, origin, rng):
    x = random_array(rng, (6, 8), np.float32)
    kwargs = {"origin": origin, "mode": "wrap"}
    if name in WEIGHTED:
        check(name, x, signed_weights(rng, (4, 5)), **kwargs)
    elif name in ("rank_filter", "percentile_filter"):
        check(name, x, 7 if name == "rank_filter" else 40, size=(4, 5), **kwargs)
    else:
        check(name, x, size=(4, 5), **kwargs)


@pytest.mark.parametrize("size,origin", [(s, o) for s in range(1, 7)
                                         for o in range(-(s // 2), (s - 1) // 2 + 1)])
@pytest.mark.parametrize("name", ONE_D)
def test_one_d_filter_origin_matches_scipy(name, size, origin, rng):
    x = random_array(rng, (4, 9), np.float64)
    check(name, x, size, origin=origin, mode="reflect")


# -------------------------------------------------------------- footprints


def _footprints():
    """Non-box footprints, each as (id, boolean array)."""
    rng = np.random.default_rng(7)
    ring = np.ones((3, 3), bool)
    ring[1, 1] = False
    ring5 = np.ones((5, 5), bool)
    ring5[1:4, 1:4] = False
    diag = np.eye(4, dtype=bool)
    checker = (np.indices((4, 3)).sum(axis=0) % 2).astype(bool)
    holey = rng.random((5, 4)) < 0.5
    holey[0, 0] = holey[-1, -1] = True
    return {
        "cross": cross(2),
        "empty-centre-3x3": ring,
        "empty-centre-5x5": ring5,
        "diagonal-4x4": diag,
        "checker-4x3": checker,
        "random-5x4": holey,
        "row-1x4": np.ones((1, 4), bool),
        "single-off-centre": np.pad([[True]], ((0, 2), (1, 0))),
        "int-mask": np.array([[0, 2, 0], [1, 0, 3]]),  # non-zero is True
    }


FOOTPRINTS = _footprints()


@pytest.mark.parametrize("footprint", list(FOOTPRINTS))
@pytest.mark.parametrize("name", ORDER_STATS)
def test_footprint_matches_scipy(name, footprint, rng):
    x = random_array(rng, (7, 8), np.float64)
    fp = FOOTPRINTS[footprint]
    taps = int(np.count_nonzero(fp))
    for mode in ("reflect", "constant", "wrap"):
        if name == "rank_filter":
            for rank in sorted({0, taps // 3, -1, -taps}):
                check(name, x, rank, footprint=fp, mode=mode, cval=-1.0)
        elif name == "percentile_filter":
            for p in (0, 33.3, 50, -25, 100):
                check(name, x, p, footprint=fp, mode=mode, cval=-1.0)
        else:
            check(name, x, footprint=fp, mode=mode, cval=-1.0)


@pytest.mark.parametrize("footprint", list(FOOTPRINTS))
@pytest.mark.parametrize("name", WEIGHTED)
def test_weights_with_zeros_inside_match_scipy(name, footprint, rng):
    # The footprint's zeros are zero weights (scipy skips them).
    x = random_array(rng, (7, 8), np.float64)
    mask = np.asarray(FOOTPRINTS[footprint]) != 0
    w = rng.standard_normal(mask.shape) * mask
    for mode in ("reflect", "constant", "wrap"):
        check(name, x, w, mode=mode, cval=-1.0)


@pytest.mark.parametrize("shape", [(2,), (4,), (2, 2), (2, 4), (4, 2, 2), (2, 3, 4), (2, 2, 2, 2)])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_even_sized_footprint_matches_scipy(name, shape, rng):
    nd = len(shape)
    x = random_array(rng, [6, 5, 4, 3][:nd], np.float32)
    for mode in ("nearest", "mirror"):
        if name in WEIGHTED:
            check(name, x, signed_weights(rng, shape), mode=mode)
        elif name == "rank_filter":
            check(name, x, 1, size=shape, mode=mode)
        elif name == "percentile_filter":
            check(name, x, 50, size=shape, mode=mode)
        else:
            check(name, x, size=shape, mode=mode)


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
@pytest.mark.parametrize("name", ORDER_STATS)
def test_random_nd_footprint_matches_scipy(name, ndim, rng):
    x = random_array(rng, [5, 6, 4, 3][:ndim], np.float64)
    fp = rng.random([3, 2, 3, 2][:ndim]) < 0.6
    fp.flat[-1] = True
    taps = int(fp.sum())
    if name == "rank_filter":
        check(name, x, -(taps // 2) - 1, footprint=fp)
    elif name == "percentile_filter":
        check(name, x, -40, footprint=fp)
    else:
        check(name, x, footprint=fp)


@pytest.mark.parametrize("name", ORDER_STATS)
def test_footprint_with_size_warns_like_scipy_and_ignores_size(name, rng):
    x = random_array(rng, (6, 7), np.float64)
    fp = FOOTPRINTS["empty-centre-3x3"]
    args = (3,) if name == "rank_filter" else (60,) if name == "percentile_filter" else ()
    with pytest.warns(UserWarning, match="ignoring size because footprint is set"):
        want = getattr(snd, name)(x.copy(), *args, size=5, footprint=fp)
    with pytest.warns(UserWarning, match="ignoring size because footprint is set"):
        got = getattr(gnd, name)(x, *args, size=5, footprint=fp)
    assert_matches(got, want)


@pytest.mark.parametrize("size", [1, (1, 1), (1, 3), (4, 1)])
@pytest.mark.parametrize("name", ["minimum_filter", "maximum_filter", "median_filter"])
def test_size_one_axes_match_scipy(name, size, rng):
    x = random_array(rng, (5, 6), np.int32)
    check(name, x, size=size)


# ------------------------------------------------------- rank / percentile


@pytest.mark.parametrize("rank", list(range(-6, 6)))
def test_every_rank_of_footprint_matches_scipy(rank, rng):
    fp = np.array([[1, 0, 1], [1, 1, 0], [0, 1, 1]], bool)  # 6 taps
    x = random_array(rng, (6, 7), np.int16)
    check("rank_filter", x, rank, footprint=fp, mode="mirror")


@pytest.mark.parametrize("rank", [-5, -3, -1, 0, 2, 4])
@pytest.mark.parametrize("dtype", ["uint8", "int32", "float16", "float32", "float64"])
def test_rank_filter_of_1d_input_matches_scipy(rank, dtype, rng):
    # scipy uses a separate 1-D algorithm here.
    x = random_array(rng, (17,), dtype)
    for mode in ("reflect", "constant", "nearest", "wrap", "mirror"):
        check("rank_filter", x, rank, size=5, mode=mode, cval=3.0)


@pytest.mark.xfail(strict=True, reason="gpufilt differs from scipy: for 1-D int64 input scipy's "
                   "rank filters (its 1-D path) compare and return the int64 values exactly; "
                   "gpufilt goes through double as scipy's N-D path does, so "
                   "median_filter(np.array([2**63-1, 2**63-2, 2**60+3, 2**60+1, 5]), 3, "
                   "mode='nearest') gives [-2**63, -2**63, 2**60, 2**60, 5], scipy "
                   "[2**63-1, 2**63-2, 2**60+3, 2**60+1, 5]")
@pytest.mark.parametrize("name", ["median_filter", "rank_filter", "percentile_filter"])
def test_rank_filter_of_1d_int64_beyond_2_to_53_matches_scipy(name, rng):
    x = rng.integers(2 ** 62, 2 ** 63 - 1, size=15, dtype=np.int64, endpoint=True)
    args = (1,) if name == "rank_filter" else (40,) if name == "percentile_filter" else ()
    got = getattr(gnd, name)(x, *args, size=3, mode="nearest")
    np.testing.assert_array_equal(got, getattr(snd, name)(x, *args, size=3, mode="nearest"))


@pytest.mark.parametrize("percentile", [-100, -75.5, -50, -0.1, 0, 10, 33.3, 50, 66.7, 99.9, 100])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4), (5,), (1, 7)])
def test_percentile_matches_scipy(percentile, shape, rng):
    x = random_array(rng, (6, 7), np.float64)
    size = shape if len(shape) == 2 else (1,) + shape
    check("percentile_filter", x, percentile, size=size, mode="nearest")


@pytest.mark.parametrize("percentile", [0, 50, 100, -50, -100])
def test_percentile_of_random_footprint_matches_scipy(percentile, rng):
    x = random_array(rng, (7, 6), np.float32)
    check("percentile_filter", x, percentile, footprint=FOOTPRINTS["random-5x4"])


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, (3, 5, 1), (2, 2, 2), (1, 4, 3)])
def test_median_of_size_matches_scipy(size, rng):
    x = random_array(rng, (6, 5, 4), np.float64)
    check("median_filter", x, size=size)


@pytest.mark.parametrize("dtype", INT_DTYPES + FLOAT_DTYPES)
def test_median_with_many_ties_matches_scipy(dtype, rng):
    x = rng.integers(0, 4, size=(7, 8)).astype(dtype)
    x[0, 0] = 5
    check("median_filter", x, size=(3, 4))
    check("rank_filter", x, 5, footprint=FOOTPRINTS["random-5x4"])


@pytest.mark.parametrize("size", [(2, 2), (3, 3), (5, 5), (3, 3, 3), (8, 8), (9, 8), (13, 5)])
def test_rank_at_every_position_of_box_matches_scipy(size, rng):
    # Footprints of up to 64 taps go through a selection network over 64
    # output positions at once (lines of 70 leave a tail); larger ones do not.
    x = rng.integers(0, 9, size=(4, 9, 70) if len(size) == 3 else (11, 70)).astype(np.float32)
    taps = int(np.prod(size))
    for rank in sorted({0, 1, taps // 3, taps // 2, taps - 2, taps - 1}):
        check("rank_filter", x, rank, size=size, mode="reflect")


# ----------------------------------------------------------- derivatives


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
@pytest.mark.parametrize("name", ["sobel", "prewitt"])
def test_edge_filter_along_each_axis_matches_scipy(name, ndim, mode, rng):
    x = random_array(rng, [7, 6, 5, 4][:ndim], np.float64)
    for axis in range(-ndim, ndim):
        check(name, x, axis=axis, mode=mode, cval=0.5)


@pytest.mark.parametrize("axes", [None, (0,), (1,), (2,), (0, 2), (2, 0), (-1,), (1, 2, 0), ()])
@pytest.mark.parametrize("name", ["laplace", "gaussian_laplace", "gaussian_gradient_magnitude",
                                  "generic_laplace", "generic_gradient_magnitude"])
def test_derivative_axes_match_scipy(name, axes, rng):
    x = random_array(rng, (5, 6, 7), np.float64)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    if name == "gaussian_laplace":
        args = (1.2,)
    check(name, x, *args, axes=axes, **kwargs)


@pytest.mark.parametrize("sigma", [0.5, 1.7, (0.8, 1.4), (1.0, 0.0)])
@pytest.mark.parametrize("name", ["gaussian_laplace", "gaussian_gradient_magnitude"])
def test_gaussian_derivative_sigma_matches_scipy(name, sigma, rng):
    x = random_array(rng, (9, 10), np.float64)
    check(name, x, sigma)


@pytest.mark.parametrize("keywords", [{"truncate": 2.0}, {"truncate": 6.0}, {"radius": 2},
                                      {"radius": (1, 3)}])
@pytest.mark.parametrize("name", ["gaussian_laplace", "gaussian_gradient_magnitude"])
def test_gaussian_derivative_keywords_reach_gaussian_filter_like_scipy(name, keywords, rng):
    x = random_array(rng, (9, 10), np.float64)
    check(name, x, 1.3, **keywords)


def test_gaussian_laplace_with_sigma_per_axis_and_axes_matches_scipy(rng):
    x = random_array(rng, (5, 6, 7), np.float64)
    check("gaussian_laplace", x, (0.8, 1.5), axes=(2, 0))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("extra", [
    {"extra_arguments": ([1.0, -2.0, 1.0],)},
    {"extra_arguments": ([1.0, -2.0, 1.0], 0.25)},
    {"extra_arguments": ([1.0, -2.0, 1.0],), "extra_keywords": {"scale": -3.0}},
    {"extra_arguments": ([0.5, -1.0, 0.25, 0.25],), "extra_keywords": {"origin": -1}},
])
def test_generic_laplace_passes_extra_arguments_like_scipy(dtype, extra, rng):
    x = random_array(rng, (6, 7, 5), dtype)
    check("generic_laplace", x, Derivative("second_difference"), mode="nearest", **extra)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("extra", [
    {"extra_arguments": (0.5,)},
    {"extra_arguments": (2.0,), "extra_keywords": {"offset_weight": 0.25}},
    {"extra_keywords": {"scale": -1.5}},
])
def test_generic_gradient_magnitude_passes_extra_arguments_like_scipy(dtype, extra, rng):
    # Small values: the squares of the derivatives stay finite in float16.
    x = (random_array(rng, (6, 7, 5), np.float64) / 8).astype(dtype)
    check("generic_gradient_magnitude", x, Derivative("scaled_sobel"), mode="reflect", **extra)


@pytest.mark.parametrize("name", ["generic_laplace", "generic_gradient_magnitude"])
def test_derivative_callback_gets_the_callers_array_and_each_axis(name, rng):
    x = random_array(rng, (4, 5, 6), np.float32)
    seen = []
    inner = DERIVATIVE_FACTORIES["sobel"](gnd)

    def spy(input, axis, output, mode, cval):
        # As scipy: the output array for the first axis, a dtype for each later one.
        seen.append((input is x, axis, mode, isinstance(output, np.ndarray)))
        return inner(input, axis, output, mode, cval)
    modes = ["wrap", "nearest", "mirror"]
    got = getattr(gnd, name)(x, spy, mode=modes, axes=(2, 0, 1))
    assert seen == [(True, 2, "wrap", True), (True, 0, "nearest", False), (True, 1, "mirror", False)]
    assert_matches(got, getattr(snd, name)(x, DERIVATIVE_FACTORIES["sobel"](snd), mode=modes, axes=(2, 0, 1)))


@pytest.mark.parametrize("output", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("name", DERIVATIVES)
def test_derivative_output_dtype_matches_scipy(name, output, rng):
    x = data(rng, (6, 7), np.int16, name)
    got = check_default(name, x, rng, output=output)
    assert got.dtype == np.dtype(output)


# -------------------------------------------------------------------- axes


@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 2), (2, 0), (-1,), (-1, -3), [1, -1],
                                  (0, 1, 2)])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_axes_subset_matches_scipy(name, axes, rng):
    x = random_array(rng, (5, 6, 7), np.float64)
    n = len(axes)
    shape = [3, 2, 4][:n]
    if name in WEIGHTED:
        check(name, x, signed_weights(rng, shape), axes=axes, origin=[-1, 0, 1][:n], mode="mirror")
    elif name == "rank_filter":
        check(name, x, -2, size=shape, axes=axes, mode="nearest")
    elif name == "percentile_filter":
        check(name, x, 30, size=shape, axes=axes, mode="nearest")
    else:
        check(name, x, size=shape, axes=axes, origin=[-1, 0, 1][:n], mode="wrap")


@pytest.mark.parametrize("axes", [(0,), (2, 0), (1, 2)])
@pytest.mark.parametrize("name", ORDER_STATS)
def test_non_box_footprint_on_axes_subset_matches_scipy(name, axes, rng):
    x = random_array(rng, (5, 6, 7), np.float32)
    fp = cross(len(axes)) if len(axes) > 1 else np.array([True, False, True])
    args = (1,) if name == "rank_filter" else (40,) if name == "percentile_filter" else ()
    check(name, x, *args, footprint=fp, axes=axes, origin=[1, -1][:len(axes)], mode="reflect")


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -2, -4])
@pytest.mark.parametrize("name", ONE_D)
def test_axis_of_1d_filter_matches_scipy(name, axis, rng):
    x = random_array(rng, (3, 4, 5, 6), np.float32)
    check(name, x, 3, axis=axis)


# ----------------------------------------------------------------- layouts


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_input_layout_matches_scipy(name, layout, rng):
    x = make_layout(rng, (6, 7, 5), np.float32, layout)
    check_default(name, x, rng)


@pytest.mark.parametrize("layout", ["C", "F", "strided", "negative", "negative-strided",
                                    "transposed"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_output_layout_matches_scipy(name, layout, rng):
    x = data(rng, (6, 7, 5), np.float64, name)
    out = make_layout(rng, x.shape, np.float64, layout)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    result = call(gnd, name, x, *args, output=out, **kwargs)
    assert result is out
    assert_matches(out, reference(name, x, *args, **kwargs))


@pytest.mark.parametrize("shape", [(11,), (6, 7), (4, 5, 6), (3, 4, 5, 3)])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_number_of_dimensions_matches_scipy(name, shape, rng):
    x = data(rng, shape, np.float64, name)
    check_default(name, x, rng)


@pytest.mark.parametrize("dtype", ["int32", "float64"])
@pytest.mark.parametrize("name", ["minimum_filter", "maximum_filter", "median_filter",
                                  "rank_filter", "percentile_filter", "laplace",
                                  "gaussian_laplace", "gaussian_gradient_magnitude",
                                  "generic_laplace", "generic_gradient_magnitude"])
def test_zero_dimensional_input_matches_scipy(name, dtype, rng):
    x = data(rng, (), dtype, name)
    args, kwargs = filter_args(name, rng, x.dtype, 0)
    if name in ORDER_STATS and "size" in kwargs:
        kwargs["size"] = 3  # a scalar size applies to no axis
    elif name in ORDER_STATS:
        kwargs["footprint"] = np.array(True)
    if name == "rank_filter":
        args = (0,)  # the one element
    if name == "gaussian_laplace":
        args = (1.0,)
    got = check(name, x, *args, **kwargs)
    assert got.shape == ()


@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128"])
@pytest.mark.parametrize("name", WEIGHTED)
def test_zero_dimensional_correlate_matches_scipy(name, dtype, rng):
    x = random_array(rng, (), dtype)
    if x.dtype.kind == "i":
        x = x // 1024
    got = check(name, x, np.array(1.5))
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
    assert call(gnd, name, x, *args, output=out, **kwargs) is out


# ------------------------------------------------------------------ output


@pytest.mark.parametrize("output", [np.float32, "float64", np.dtype("int32"), "uint16", np.float16,
                                    np.int64])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_output_dtype_matches_scipy(name, output, rng):
    # Positive data with convex weights: every result fits every output
    # dtype, except derivatives into unsigned outputs (skipped).
    if name in DERIVATIVES and np.dtype(output).kind == "u":
        output = np.int16
    # Derivatives: small enough that float16 squares stay finite.
    x = rng.random((6, 7)) * (10 if name in DERIVATIVES else 50) + 1
    args, kwargs = filter_args(name, rng, np.uint8, x.ndim)
    got = check(name, x, *args, output=output, **kwargs)
    assert got.dtype == np.dtype(output)


@pytest.mark.parametrize("out_dtype", ["float64", "float32", "uint8", "int16"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_output_array_is_written_and_returned(name, out_dtype, rng):
    if name in DERIVATIVES and out_dtype == "uint8":
        out_dtype = "int32"  # derivatives are negative; squares exceed int8
    x = (rng.random((6, 7)) * 20 + 1).astype(np.float32)
    out = random_array(rng, x.shape, out_dtype)
    args, kwargs = filter_args(name, rng, np.uint8, x.ndim)
    result = call(gnd, name, x, *args, output=out, **kwargs)
    assert result is out
    assert_matches(out, reference(name, x, *args, output=out.dtype, **kwargs))


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float16", "float32", "float64"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_in_place_matches_scipy_on_a_copy(name, dtype, rng):
    if needs_signed_output(name, dtype):
        dtype = "int8"
    x = data(rng, (7, 8), dtype, name)
    args, kwargs = filter_args(name, rng, dtype, x.ndim)
    expected = reference(name, x, *args, **kwargs)
    assert call(gnd, name, x, *args, output=x, **kwargs) is x
    assert_matches(x, expected)


@pytest.mark.parametrize("dtype", COMPLEX_DTYPES)
@pytest.mark.parametrize("complex_weights", [False, True])
@pytest.mark.parametrize("name", WEIGHTED)
def test_complex_in_place_matches_scipy_on_a_copy(name, complex_weights, dtype, rng):
    x = random_array(rng, (6, 7), dtype)
    w = rng.standard_normal((3, 2))
    if complex_weights:
        w = w + 1j * rng.standard_normal((3, 2))
    expected = scipy_reference(name, x, w, mode="constant", cval=1 - 1j)
    assert getattr(gnd, name)(x, w, output=x, mode="constant", cval=1 - 1j) is x
    assert_matches(x, expected)


@pytest.mark.parametrize("layout", ["F", "strided", "negative", "transposed"])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS + ["sobel", "laplace", "generic_laplace"])
def test_in_place_on_a_view_matches_scipy_on_a_copy(name, layout, rng):
    x = make_layout(rng, (6, 7, 5), np.float64, layout)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    expected = reference(name, x, *args, **kwargs)
    assert call(gnd, name, x, *args, output=x, **kwargs) is x
    assert_matches(x, expected)




@pytest.mark.parametrize("overlap", OVERLAPS)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_overlapping_output_matches_scipy_on_a_copy(name, overlap, rng):
    x, out = _overlapping_pairs(rng)[overlap]
    assert np.shares_memory(x, out)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    expected = reference(name, x, *args, **kwargs)
    assert call(gnd, name, x, *args, output=out, **kwargs) is out
    assert_matches(out, expected)


@pytest.mark.parametrize("name", WEIGHTED)
def test_complex_weights_into_overlapping_output_match_scipy_on_a_copy(name, rng):
    buf = random_array(rng, (9, 8), np.complex128)
    x, out = buf[:-2], buf[2:]
    w = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    expected = scipy_reference(name, x, w)
    assert getattr(gnd, name)(x, w, output=out) is out
    assert_matches(out, expected)


# 2-D: scipy's 1-D rank filter path (median of 1-D input) writes garbage or
# crashes when the output dtype differs from the input's (SciPy 1.17).
@pytest.mark.parametrize("name", ["median_filter", "minimum_filter", "correlate", "laplace"])
def test_overlapping_output_of_other_dtype_matches_scipy_on_a_copy(name, rng):
    buf = random_array(rng, (64,), np.float64)
    x = buf[:40].reshape(5, 8)
    out = buf.view(np.float32)[30:70].reshape(5, 8)  # bytes 120..280 of x's 0..320
    assert np.shares_memory(x, out)
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    expected = scipy_reference(name, x, *args, output=np.float32, **kwargs)
    assert getattr(gnd, name)(x, *args, output=out, **kwargs) is out
    assert_matches(out, expected)


# ------------------------------------------------- sizes and oddities


@pytest.mark.parametrize("name", ["median_filter", "rank_filter", "percentile_filter",
                                  "minimum_filter"])
def test_large_footprint_on_uint8_matches_scipy(name, rng):
    x = random_array(rng, (30, 33), np.uint8)
    args = (-40,) if name == "rank_filter" else (20,) if name == "percentile_filter" else ()
    check(name, x, *args, size=15)


@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_7x7x7_random_footprint_matches_scipy(name, rng):
    x = random_array(rng, (8, 9, 10), np.float32)
    fp = rng.random((7, 7, 7)) < 0.5
    if name in WEIGHTED:
        check(name, x, signed_weights(rng, fp.shape) * fp, mode="wrap")
    elif name == "rank_filter":
        check(name, x, int(fp.sum()) // 3, footprint=fp, mode="wrap")
    elif name == "percentile_filter":
        check(name, x, 80, footprint=fp, mode="wrap")
    else:
        check(name, x, footprint=fp, mode="wrap")


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
def test_box_medians_of_rows_longer_than_a_chunk_match_scipy(dtype, rng):
    # The box kernels take 512 bytes of output pairs a chunk, a vector (up
    # to 64 bytes) at a time: rows of several chunks and a ragged end.
    x = random_array(rng, (6, 2 * 1024 + 77), dtype)
    check("median_filter", x, size=5, mode="nearest")
    check("median_filter", x, size=3, mode="reflect")
    check("median_filter", random_array(rng, (4, 3, 1100), dtype), size=3, mode="mirror")


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
def test_multithreaded_size_matches_scipy(dtype, rng):
    # Large enough (lines x length > 32768) for the OpenMP path.
    x = random_array(rng, (190, 230), dtype)
    check("median_filter", x, size=3)
    check("median_filter", x, size=5, mode="nearest")
    check("median_filter", random_array(rng, (23, 24, 70), dtype), size=3)
    check("maximum_filter", x, footprint=cross(2, 5))
    check("correlate", x, weights_for(rng, dtype, (3, 4)))
    if x.dtype.kind == "f":
        check("gaussian_gradient_magnitude", x, 1.5)


@pytest.mark.parametrize("name", WEIGHTED)
def test_weights_below_machine_epsilon_are_skipped_like_scipy(name, rng):
    # scipy drops weights with |w| <= DBL_EPSILON: on data of 1e20 they would add 1e4.
    x = random_array(rng, (6, 7), np.float64) * 1e20
    w = np.array([[1e-16, 1.0, -2e-16], [0.5, 1e-300, 3.0]])
    check(name, x, w)


@pytest.mark.parametrize("weights", [[[1, 2], [3, 4]], [[0, 1, 0], [1, -4, 1], [0, 1, 0]],
                                     [[True, False, True]]])
@pytest.mark.parametrize("name", WEIGHTED)
def test_integer_and_list_weights_match_scipy(name, weights, rng):
    x = random_array(rng, (5, 6), np.float64)
    check(name, x, weights)


@pytest.mark.parametrize("rank", [np.int64(2), np.uint8(1), True, -np.int32(2)])
def test_numpy_integer_rank_matches_scipy(rank, rng):
    x = random_array(rng, (5, 6), np.float32)
    check("rank_filter", x, rank, size=3)


@pytest.mark.parametrize("percentile", [np.float32(33.3), np.int64(-20), 50])
def test_numpy_scalar_percentile_matches_scipy(percentile, rng):
    x = random_array(rng, (5, 6), np.float32)
    check("percentile_filter", x, percentile, size=(2, 3))


def _pad_reference(x, weights, origin, pad_mode, reduce):
    """An independent 1-D oracle: np.pad, then a window per output element."""
    size = len(weights)
    p = 2 * size
    xp = np.pad(x, p, mode=pad_mode)
    start = p - (size // 2 + origin)
    windows = np.stack([xp[start + i:start + i + size] for i in range(len(x))])
    return reduce(windows)


@pytest.mark.parametrize("size,origin", [(9, 4), (10, 3), (10, 4), (11, 3), (11, 5)])
@pytest.mark.parametrize("mode", ["reflect", "grid-mirror"])
def test_two_element_line_with_long_footprint_matches_padding(size, origin, mode, rng):
    # SciPy 1.17's N-D correlate and rank filters extend a 2-element line
    # wrongly in these cases (its own correlate1d gets them right): gpufilt
    # is compared with np.pad's 'symmetric' extension instead.
    x = random_array(rng, (3, 2), np.float64)
    w = signed_weights(rng, size)
    want = np.stack([_pad_reference(row, w, origin, "symmetric", lambda win: win @ w)
                     for row in x])
    assert_matches(gnd.correlate(x, w[None], mode=mode, origin=(0, origin)), want)
    assert_matches(gnd.correlate1d(x, w, mode=mode, origin=origin), want)
    want = np.stack([_pad_reference(row, w, origin, "symmetric",
                                    lambda win: np.sort(win, axis=1)[:, size // 3])
                     for row in x])
    np.testing.assert_array_equal(
        gnd.rank_filter(x, size // 3, size=(1, size), mode=mode, origin=(0, origin)), want)


@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_origins_with_all_axes_permuted_follow_scipy(name, rng):
    x = random_array(rng, (5, 6), np.float64)
    fp = FOOTPRINTS["empty-centre-3x3"]
    kwargs = {"origin": (1, 0), "axes": (1, 0)}
    if name in WEIGHTED:
        check(name, x, signed_weights(rng, (3, 3)), **kwargs)
    elif name == "rank_filter":
        check(name, x, 3, footprint=fp, **kwargs)
    elif name == "percentile_filter":
        check(name, x, 60, footprint=fp, **kwargs)
    else:
        check(name, x, footprint=fp, **kwargs)


def test_gaussian_laplace_sigmas_with_all_axes_permuted_follow_scipy(rng):
    x = random_array(rng, (6, 7), np.float64)
    check("gaussian_laplace", x, (1.0, 2.0), axes=(1, 0))


@pytest.mark.parametrize("name", ["gaussian_gradient_magnitude", "generic_gradient_magnitude"])
def test_float16_gradient_magnitude_with_large_derivatives_stays_finite(name, rng):
    x = (random_array(rng, (6, 7), np.float64) * 60).astype(np.float16)
    args = (0.5,) if name == "gaussian_gradient_magnitude" else (Derivative("sobel"),)
    want = reference(name, x, *args)
    assert np.isfinite(want).all() and np.abs(want).max() > 256
    got = call(gnd, name, x, *args)
    assert_matches(got, want)


# ------------------------------------------------------------ weighted sums
#
# correlate/convolve sum each block of outputs in registers through all the
# taps (core/cpu_footprint.cpp, weighted_sum_line): in double in scipy's
# order, products and sums rounded apart, so every copy of the kernel gives
# scipy's bits; smoothings of float32/float16 data into float outputs in
# float, within the float tolerance. Lines of 70-300 elements leave partial
# blocks of every copy (8 to 64 outputs a block).

WEIGHTS_SHAPES = [(7,), (5, 5), (2, 3), (3, 3, 3), (5, 5, 5)]


def _data_for(wshape, dtype, rng):
    shape = {1: (300,), 2: (23, 131), 3: (7, 9, 70)}[len(wshape)]
    return random_array(rng, shape, dtype)


@pytest.mark.parametrize("mode", ["reflect", "constant", "wrap"])
@pytest.mark.parametrize("wshape", WEIGHTS_SHAPES)
@pytest.mark.parametrize("name", WEIGHTED)
def test_weighted_sums_in_double_are_scipys_bits(name, wshape, mode, rng):
    x = _data_for(wshape, np.float64, rng)
    w = rng.standard_normal(wshape)
    got = getattr(gnd, name)(x, w, mode=mode, cval=0.7)
    np.testing.assert_array_equal(got, getattr(snd, name)(x, w, mode=mode, cval=0.7))


@pytest.mark.parametrize("wshape", WEIGHTS_SHAPES)
def test_smoothing_into_float64_output_sums_in_double(wshape, rng):
    # float32 data asked into float64: scipy's bits, not float sums.
    x = _data_for(wshape, np.float32, rng)
    w = rng.random(wshape) + 0.01
    got = gnd.correlate(x, w, output=np.float64, mode="mirror")
    np.testing.assert_array_equal(got, snd.correlate(x, w, output=np.float64, mode="mirror"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wshape", WEIGHTS_SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_smoothings_of_float_data_sum_in_float_within_tolerance(dtype, wshape, mode, rng):
    x = _data_for(wshape, dtype, rng)
    w = rng.random(wshape) + 0.01
    for name in WEIGHTED:
        got = getattr(gnd, name)(x, w, mode=mode, cval=1.5)
        assert got.dtype == np.dtype(dtype)
        assert_matches(got, scipy_reference(name, x, w, mode=mode, cval=1.5), err_msg=name)


def test_smoothing_with_a_long_row_sums_in_float_within_tolerance():
    # 1001 taps in one row, summed in runs of 16, then the runs' sums. Where
    # a window starts at 2**24, one float accumulator would drop all the
    # 1000 ones after it (6e-5 of the sum); runs of 16 drop 15 at most.
    x = np.ones((2, 1500), np.float32)
    x[0, 100] = x[1, 1400] = 2.0 ** 24
    w = np.ones((1, 1001))
    assert_matches(gnd.correlate(x, w, mode="wrap"), scipy_reference("correlate", x, w, mode="wrap"))


def test_smoothing_of_float32_data_is_summed_in_float(rng):
    # The float path is taken: its results are not all scipy's double ones.
    x = _data_for((5, 5, 5), np.float32, rng)
    w = rng.random((5, 5, 5)) + 0.01
    assert np.any(gnd.correlate(x, w) != snd.correlate(x, w))


@pytest.mark.parametrize("cval", [1e39, -np.inf])
def test_smoothing_with_cval_beyond_float_sums_in_double(cval, rng):
    # Float sums would overflow where scipy's double sums do not.
    x = random_array(rng, (9, 40), np.float32)
    w = np.full((3, 3), 1 / 9)
    np.testing.assert_array_equal(gnd.correlate(x, w, mode="constant", cval=cval),
                                  snd.correlate(x, w, mode="constant", cval=cval))


def test_smoothing_of_too_many_runs_for_float_sums_in_double(rng):
    # 61 x 61 taps: 244 runs of up to 16, past the float bound: scipy's bits.
    x = random_array(rng, (70, 90), np.float32)
    w = rng.random((61, 61)) + 0.01
    np.testing.assert_array_equal(gnd.correlate(x, w, mode="reflect"), snd.correlate(x, w, mode="reflect"))


def test_smoothing_with_rows_of_unequal_taps_sums_in_float_within_tolerance(rng):
    # A ball: footprint rows of 1 to 7 taps, each summed on its own, of data
    # far from zero (where float rounding shows most).
    z, y, x_ = np.mgrid[-3:4, -3:4, -3:4]
    w = np.where(z * z + y * y + x_ * x_ <= 9, rng.random((7, 7, 7)) + 0.01, 0.0)
    x = (1000 + random_array(rng, (9, 12, 80), np.float32)).astype(np.float32)
    assert_matches(gnd.correlate(x, w, mode="nearest"), scipy_reference("correlate", x, w, mode="nearest"))


# ------------------------------------------------------------- bad inputs


def raises_untouched(exc, match, name, x, out, *args, **kwargs):
    """Calls gnd.<name>(x, *args, output=out, ...): it must raise `exc`
    matching `match`, leaving x and out as they were."""
    with untouched(x, out), pytest.raises(exc, match=match):
        call(gnd, name, x, *args, output=out, **kwargs)


@pytest.fixture
def x(rng):
    return random_array(rng, (5, 6), np.float64)


@pytest.fixture
def out(rng):
    return random_array(rng, (5, 6), np.float64)


# scipy's words (RuntimeError): "footprint.ndim (3) must match len(axes) (2)",
# and for box footprints of the separable filters "sequence argument must
# have length equal to input rank".
WRONG_RANK = r"must match len\(axes\)|sequence argument must have length equal to input rank"


@pytest.mark.parametrize("ndim", [0, 1, 3])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_footprint_of_wrong_rank_raises_value_error(name, ndim, x, out):
    fp = np.ones((3,) * ndim)
    if ndim:
        fp.flat[0] = 0  # non-box: no separable shortcut
    if name in WEIGHTED:
        raises_untouched(gpufilt.ArgumentError, WRONG_RANK, name, x, out, fp)
    elif name in ("rank_filter", "percentile_filter"):
        raises_untouched(gpufilt.ArgumentError, WRONG_RANK, name, x, out, 1, footprint=fp)
    else:
        raises_untouched(gpufilt.ArgumentError, WRONG_RANK, name, x, out, footprint=fp)


@pytest.mark.parametrize("name", ORDER_STATS)
def test_box_footprint_of_wrong_rank_raises_value_error(name, x, out):
    args = (1,) if name in ("rank_filter", "percentile_filter") else ()
    raises_untouched(gpufilt.ArgumentError, WRONG_RANK, name, x, out, *args, footprint=np.ones((3, 3, 3)))


@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_footprint_of_wrong_rank_for_axes_raises_value_error(name, rng, out):
    x = random_array(rng, (5, 6), np.float64)
    fp = cross(2)
    args = (fp,) if name in WEIGHTED else (1,) if name in ("rank_filter", "percentile_filter") \
        else ()
    kwargs = {} if name in WEIGHTED else {"footprint": fp}
    raises_untouched(gpufilt.ArgumentError, WRONG_RANK, name, x, out, *args, axes=(1,), **kwargs)


@pytest.mark.parametrize("rank", [4, 5, 100, -6, -50])
def test_rank_out_of_range_raises_value_error(rank, x, out):
    fp = np.array([[1, 0, 1], [0, 1, 1]], bool)  # 4 taps
    raises_untouched(ValueError, "rank", "rank_filter", x, out, rank, footprint=fp)


@pytest.mark.parametrize("rank", [9, -10])
def test_rank_out_of_range_of_size_raises_value_error(rank, x, out):
    raises_untouched(ValueError, "rank", "rank_filter", x, out, rank, size=3)


@pytest.mark.parametrize("rank", [1.5, "2", None, [1]])
def test_non_integer_rank_raises_type_error(rank, x, out):
    raises_untouched(TypeError, "rank", "rank_filter", x, out, rank, size=3)


@pytest.mark.parametrize("percentile", [-100.5, -101, 100.01, 150, 1e9, float("inf"),
                                        float("nan")])
def test_percentile_outside_range_raises_value_error(percentile, x, out):
    raises_untouched(ValueError, "percentile", "percentile_filter", x, out, percentile, size=3)


@pytest.mark.parametrize("name", ORDER_STATS)
def test_neither_size_nor_footprint_raises_value_error(name, x, out):
    args = (1,) if name in ("rank_filter", "percentile_filter") else ()
    raises_untouched(ValueError, "footprint", name, x, out, *args)


@pytest.mark.parametrize("shape", [(3, 3), (1, 1), (2, 5)])
@pytest.mark.parametrize("name", ORDER_STATS)
def test_all_zero_footprint_raises_value_error(name, shape, x, out):
    args = (0,) if name in ("rank_filter", "percentile_filter") else ()
    raises_untouched(ValueError, "all-zero footprint", name, x, out, *args,
                     footprint=np.zeros(shape, bool))


@pytest.mark.parametrize("dtype", COMPLEX_DTYPES)
@pytest.mark.parametrize("name", REAL_ONLY)
def test_complex_input_to_order_statistics_raises_type_error(name, dtype, rng):
    x = random_array(rng, (5, 6), dtype)
    out = random_array(rng, (5, 6), dtype)
    args, kwargs = filter_args(name, rng, np.float64, x.ndim)
    raises_untouched(TypeError, "complex", name, x, out, *args, **kwargs)


@pytest.mark.parametrize("modes", [["reflect", "wrap"], ("constant", "nearest")])
@pytest.mark.parametrize("name", ORDER_STATS)
def test_mode_sequence_with_non_separable_footprint_raises_value_error(name, modes, x, out):
    args = (2,) if name == "rank_filter" else (40,) if name == "percentile_filter" else ()
    raises_untouched(ValueError, "sequence of modes", name, x, out, *args,
                     footprint=FOOTPRINTS["empty-centre-3x3"], mode=modes)


@pytest.mark.parametrize("name", ["median_filter", "rank_filter", "percentile_filter"])
def test_mode_sequence_for_rank_between_extremes_raises_value_error(name, x, out):
    # Not the minimum or maximum, so not separable even for a box.
    args = (2,) if name == "rank_filter" else (40,) if name == "percentile_filter" else ()
    raises_untouched(ValueError, "sequence of modes", name, x, out, *args, size=3,
                     mode=["reflect", "wrap"])


@pytest.mark.parametrize("name", WEIGHTED)
def test_mode_sequence_for_weights_raises_value_error(name, x, out):
    raises_untouched(ValueError, "sequence of modes", name, x, out, np.ones((3, 3)),
                     mode=["reflect", "wrap"])


@pytest.mark.parametrize("mode", ["bogus", "", None, 3])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_invalid_mode_raises_value_error(name, mode, rng, x, out):
    args, kwargs = filter_args(name, rng, x.dtype, x.ndim)
    raises_untouched(ValueError, "mode", name, x, out, *args, mode=mode, **kwargs)


@pytest.mark.parametrize("origin", [(2, 0), (-2, 0), (0, 2), (0, -3), 2, -3])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_invalid_origin_raises_value_error(name, origin, x, out):
    # footprint (3, 4): valid origins are -1..1 and -2..1.
    kwargs = {"origin": origin}
    fp = np.ones((3, 4), bool)
    fp[0, 0] = False
    if name in WEIGHTED:
        raises_untouched(ValueError, "origin", name, x, out, np.ones((3, 4)), **kwargs)
    elif name in ("rank_filter", "percentile_filter"):
        raises_untouched(ValueError, "origin", name, x, out, 2, footprint=fp, **kwargs)
    else:
        raises_untouched(ValueError, "origin", name, x, out, footprint=fp, **kwargs)


@pytest.mark.parametrize("name", ["minimum_filter", "maximum_filter"])
def test_invalid_origin_of_box_raises_value_error(name, x, out):
    raises_untouched(ValueError, "origin", name, x, out, size=(3, 2), origin=(0, 1))


@pytest.mark.parametrize("name", ONE_D)
@pytest.mark.parametrize("size,origin", [(1, 1), (3, 2), (3, -2), (4, 2), (4, -3)])
def test_invalid_origin_of_1d_filter_raises_value_error(name, size, origin, x, out):
    raises_untouched(ValueError, "origin", name, x, out, size, origin=origin)


@pytest.mark.parametrize("origin", [(0, 0, 0), (1,)])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_origin_sequence_of_wrong_length_raises_value_error(name, origin, x, out):
    args = (np.ones((3, 3)),) if name in WEIGHTED else \
        (1,) if name in ("rank_filter", "percentile_filter") else ()
    kwargs = {} if name in WEIGHTED else {"size": 3}
    raises_untouched(ValueError, "origin", name, x, out, *args, origin=origin, **kwargs)


@pytest.mark.parametrize("origin", [0.5, "1", None])
@pytest.mark.parametrize("name", FOOTPRINT_FILTERS)
def test_non_integer_origin_raises_type_error(name, origin, x, out):
    fp = cross(2)
    args = (np.ones((3, 3)),) if name in WEIGHTED else \
        (1,) if name in ("rank_filter", "percentile_filter") else ()
    kwargs = {} if name in WEIGHTED else {"footprint": fp}
    raises_untouched(TypeError, "origin", name, x, out, *args, origin=origin, **kwargs)


@pytest.mark.parametrize("size", [0, -1, (3, 0)])
@pytest.mark.parametrize("name", ["minimum_filter", "maximum_filter", "median_filter",
                                  "minimum_filter1d", "maximum_filter1d"])
def test_zero_or_negative_size_raises_value_error(name, size, x, out):
    if name in ONE_D and np.ndim(size):
        size = 0
    raises_untouched(ValueError, "size", name, x, out, *((size,) if name in ONE_D else ()),
                     **({} if name in ONE_D else {"size": size}))


@pytest.mark.parametrize("size", [(3, 3, 3), (3,)])
@pytest.mark.parametrize("name", ["minimum_filter", "median_filter", "rank_filter"])
def test_size_sequence_of_wrong_length_raises_value_error(name, size, x, out):
    args = (1,) if name == "rank_filter" else ()
    raises_untouched(ValueError, "size", name, x, out, *args, size=size)


@pytest.mark.parametrize("weights", [np.array(["a", "b"]), np.array([object(), 1.0], dtype=object)])
@pytest.mark.parametrize("name", WEIGHTED)
def test_non_numeric_weights_raise_type_error(name, weights, x, out):
    raises_untouched(TypeError, "weights", name, x, out, np.stack([weights, weights]))


@pytest.mark.parametrize("name", WEIGHTED)
def test_complex_cval_with_real_input_raises_value_error(name, x, out):
    raises_untouched(ValueError, "complex", name, x, out, np.ones((2, 3)), mode="constant",
                     cval=1 + 2j)


@pytest.mark.parametrize("name", ["minimum_filter", "median_filter"])
def test_output_of_wrong_shape_raises_value_error(name, x, rng):
    out = random_array(rng, (6, 5), np.float64)
    raises_untouched(ValueError, "shape", name, x, out, size=3)


@pytest.mark.parametrize("name", ["sobel", "prewitt", "minimum_filter1d"])
@pytest.mark.parametrize("axis", [2, -3])
def test_axis_out_of_range_raises_value_error(name, axis, x, out):
    args = (3,) if name in ONE_D else ()
    raises_untouched(ValueError, "axis", name, x, out, *args, axis=axis)


@pytest.mark.parametrize("axes", [(0, 0), (2,), (-3,)])
@pytest.mark.parametrize("name", ["median_filter", "correlate", "laplace",
                                  "gaussian_gradient_magnitude"])
def test_bad_axes_raise_value_error(name, axes, x, out):
    args = (np.ones(len(axes) * (3,)),) if name == "correlate" else \
        (1.0,) if name == "gaussian_gradient_magnitude" else ()
    kwargs = {"size": 3} if name == "median_filter" else {}
    raises_untouched(ValueError, "ax", name, x, out, *args, axes=axes, **kwargs)


@pytest.mark.parametrize("name", ["gaussian_laplace", "gaussian_gradient_magnitude"])
def test_negative_sigma_of_gaussian_derivative_raises_value_error(name, x, out):
    raises_untouched(ValueError, "sigma", name, x, out, -1.0)


# ------------------------------------- order statistics in the input's own type
# uint8, int8, uint16, int16, float16 and float32 data are ranked in their
# own type (a vector holds more of them than of doubles); the results must
# stay scipy's to the last bit, whatever the mode, cval and output dtype.

NARROW_DTYPES = ["uint8", "int8", "uint16", "int16", "float32"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", NARROW_DTYPES)
@pytest.mark.parametrize("name", ORDER_STATS)
def test_order_statistic_in_own_type_equals_scipy(name, dtype, mode, rng):
    x = random_array(rng, (9, 70), dtype)  # 70: vectors and a tail
    args = (7,) if name == "rank_filter" else (30,) if name == "percentile_filter" else ()
    # cvals the dtype holds, and 2.5, which it does not (ranked in double
    # then); cvals out of the dtype's range are left out: scipy's own result
    # then depends on its conversion of cval (not this path).
    for cval in (0.0, 3.0, 2.5, 100.0):
        got = getattr(gnd, name)(x, *args, size=(3, 4), mode=mode, cval=cval)
        want = getattr(snd, name)(x, *args, size=(3, 4), mode=mode, cval=cval)
        np.testing.assert_array_equal(got, want, err_msg=f"cval={cval}")


@pytest.mark.parametrize("output", ["float64", "float32", "int32", "uint8", "float16"])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32"])
def test_median_in_own_type_into_other_output_equals_scipy(dtype, output, rng):
    x = random_array(rng, (8, 40), dtype)
    for cval in (5.0, 120.0):  # fractional cvals: see the test above
        kwargs = dict(size=5, mode="constant", cval=cval)
        got = gnd.median_filter(x, output=np.dtype(output), **kwargs)
        want = snd.median_filter(x, output=np.float32 if output == "float16" else np.dtype(output),
                                 **kwargs)
        np.testing.assert_array_equal(got, want.astype(output), err_msg=f"cval={cval}")


@pytest.mark.parametrize("name", ORDER_STATS)
def test_float32_order_statistic_with_nan_equals_float64_one(name, rng):
    # scipy's NaN order is implementation-defined (see the top); ranking in
    # float must place NaN exactly as ranking the same values in double does.
    x = random_array(rng, (6, 40), np.float32)
    x[2, 5] = x[4, 17] = np.nan
    args = (3,) if name == "rank_filter" else (60,) if name == "percentile_filter" else ()
    got = getattr(gnd, name)(x, *args, size=3, mode="nearest")
    in_double = getattr(gnd, name)(x.astype(np.float64), *args, size=3, mode="nearest")
    np.testing.assert_array_equal(got, in_double.astype(np.float32))


@pytest.mark.parametrize("size", [3, 5, (5, 7), 8])
def test_float16_median_matches_scipy(size, rng):
    x = random_array(rng, (9, 40), np.float16)
    check("median_filter", x, size=size, mode="constant", cval=0.3)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size", [3, 4, 5, 8, 9, 12, 15, (9, 10), (15, 6)])
def test_uint8_box_median_equals_scipy(size, mode, rng):
    # Boxes of more than 64 taps over uint8 take a sliding histogram; fewer
    # the selection network. Odd and even shapes, lines shorter than the box.
    for shape in [(23, 30), (16, 9)]:
        x = random_array(rng, shape, np.uint8)
        got = gnd.median_filter(x, size, mode=mode, cval=17)
        np.testing.assert_array_equal(got, snd.median_filter(x, size, mode=mode, cval=17))


@pytest.mark.parametrize("size", [9, 12, (4, 5, 6)])
def test_uint8_box_rank_and_percentile_equal_scipy(size, rng):
    x = random_array(rng, (10, 13, 21) if isinstance(size, tuple) else (19, 26), np.uint8)
    x[3:6] = 200  # ties
    taps = int(np.prod(size)) if isinstance(size, tuple) else size * size
    for rank in (0, 1, taps // 3, taps - 2, taps - 1, -1):
        got = gnd.rank_filter(x, rank, size=size, mode="mirror")
        np.testing.assert_array_equal(got, snd.rank_filter(x, rank, size=size, mode="mirror"))
    for percentile in (0, 20, 50, 99.5, 100):
        got = gnd.percentile_filter(x, percentile, size=size, mode="wrap")
        np.testing.assert_array_equal(got, snd.percentile_filter(x, percentile, size=size, mode="wrap"))


@pytest.mark.parametrize("size", [3, 5, (3, 3, 3)])
@pytest.mark.parametrize("dtype", [d for d in REAL_DTYPES if d != "float16"])
def test_unrolled_median_networks_equal_scipy(dtype, size, rng):
    # 3x3, 5x5 and 3x3x3 medians run networks unrolled at compile time.
    x = random_array(rng, (5, 6, 37) if isinstance(size, tuple) else (9, 75), dtype)
    for mode in ("reflect", "constant"):
        np.testing.assert_array_equal(gnd.median_filter(x, size, mode=mode, cval=1),
                                      snd.median_filter(x, size, mode=mode, cval=1))


@pytest.mark.parametrize("taps", [9, 25, 27])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
def test_median_of_other_footprints_of_9_25_27_taps_equals_scipy(taps, dtype, rng):
    # Footprints that are not boxes take the whole-footprint networks.
    shape = {9: (3, 4), 25: (5, 6), 27: (3, 3, 4)}[taps]
    fp = np.zeros(shape, bool)
    fp.flat[rng.permutation(fp.size)[:taps]] = True
    x = random_array(rng, (6, 7, 40) if fp.ndim == 3 else (9, 70), dtype)
    np.testing.assert_array_equal(gnd.median_filter(x, footprint=fp, mode="mirror"),
                                  snd.median_filter(x, footprint=fp, mode="mirror"))


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
@pytest.mark.parametrize("name", ["minimum_filter", "maximum_filter"])
def test_min_max_of_other_footprints_with_nan_equal_scipy(name, dtype, rng):
    # Footprints that are not boxes reduce tap by tap, keeping the value so
    # far unless the tap's is smaller (larger): NaN stays only where the
    # first tap holds it, as in scipy. Lines past a vector, and shorter.
    fp = np.array([[0, 1, 0, 0], [1, 1, 1, 1], [0, 1, 1, 0]], bool)
    for shape in ((9, 70), (5, 3)):
        x = random_array(rng, shape, dtype)
        if x.dtype.kind == "f":
            x[rng.random(x.shape) < 0.05] = np.nan
        for mode in ("reflect", "constant", "nearest"):
            np.testing.assert_array_equal(getattr(gnd, name)(x, footprint=fp, mode=mode, cval=3),
                                          getattr(snd, name)(x, footprint=fp, mode=mode, cval=3))


# ------------------------------------------------ box medians, two at a time
# The medians of 3x3, 5x5 and 3x3x3 boxes sort each column of the box once,
# merge columns in pairs, and select two neighbouring outputs from what they
# share, from lines split in even and odd columns, in chunks. The cases
# below: every mode, lines of odd and even lengths, shorter than the box,
# past a vector and past a chunk (1024 uint8 values), ties, origins, layouts.
BOX_MEDIANS = [(5, 2), (3, 2), (3, 3)]  # (size, ndim)
BOX_DTYPES = ["uint8", "int8", "uint16", "int16", "float32", "float64"]


def box_shapes(ndim):
    if ndim == 2:
        return [(1, 1), (2, 3), (4, 1), (7, 2), (6, 9), (5, 70), (3, 67)]
    return [(1, 1, 1), (2, 3, 4), (4, 5, 33), (3, 3, 70)]


@pytest.mark.parametrize("dtype", BOX_DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size,ndim", BOX_MEDIANS)
def test_box_median_equals_scipy_in_every_mode(size, ndim, mode, dtype, rng):
    # cval 2.5 is not held by the integer types: ranked in double then.
    for shape in box_shapes(ndim):
        x = random_array(rng, shape, dtype)
        for cval in (17.0, 2.5) if "constant" in mode else (0.0,):
            np.testing.assert_array_equal(gnd.median_filter(x, size, mode=mode, cval=cval),
                                          snd.median_filter(x, size, mode=mode, cval=cval),
                                          err_msg=f"shape {shape}, cval {cval}")


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
@pytest.mark.parametrize("size,ndim", BOX_MEDIANS)
def test_box_median_of_long_lines_with_ties_equals_scipy(size, ndim, dtype, rng):
    shape = (6, 2051) if ndim == 2 else (3, 4, 1100)
    for high in (3, 200):  # many ties, few
        x = rng.integers(0, high, shape).astype(dtype)
        for mode in ("nearest", "wrap"):
            np.testing.assert_array_equal(gnd.median_filter(x, size, mode=mode),
                                          snd.median_filter(x, size, mode=mode))


@pytest.mark.parametrize("origin", [(-2, 2), (1, -1), (0, 2), -1])
def test_box_median_with_origin_equals_scipy(origin, rng):
    x = random_array(rng, (11, 41), np.uint8)
    for size in (5, 3):
        if np.max(np.abs(origin)) > size // 2:
            continue
        np.testing.assert_array_equal(gnd.median_filter(x, size, mode="reflect", origin=origin),
                                      snd.median_filter(x, size, mode="reflect", origin=origin))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("size,ndim", BOX_MEDIANS)
def test_box_median_of_any_layout_equals_scipy(size, ndim, layout, rng):
    for dtype in ("uint8", "float32"):
        x = make_layout(rng, (9, 37) if ndim == 2 else (6, 7, 9), dtype, layout)
        np.testing.assert_array_equal(gnd.median_filter(x, size, mode="nearest"),
                                      snd.median_filter(x, size, mode="nearest"))


@pytest.mark.parametrize("layout", ["F", "strided", "negative", "transposed"])
def test_box_median_into_any_output_layout_equals_scipy(layout, rng):
    x = random_array(rng, (9, 37), np.int16)
    out = make_layout(rng, x.shape, np.int16, layout)
    assert gnd.median_filter(x, 5, output=out, mode="mirror") is out
    np.testing.assert_array_equal(out, snd.median_filter(x, 5, mode="mirror"))


def test_box_median_over_two_axes_of_a_volume_equals_scipy(rng):
    x = random_array(rng, (4, 9, 40), np.uint8)
    for size in ((1, 5, 5), (5, 5, 1), (3, 1, 3)):
        np.testing.assert_array_equal(gnd.median_filter(x, size, mode="wrap"),
                                      snd.median_filter(x, size, mode="wrap"))
    np.testing.assert_array_equal(gnd.median_filter(x, 5, axes=(0, 2)),
                                  snd.median_filter(x, 5, axes=(0, 2)))


@pytest.mark.parametrize("size,ndim", BOX_MEDIANS)
def test_box_median_with_nan_equals_scipy_where_no_nan_and_float64_one(size, ndim, rng):
    # scipy's NaN order is implementation-defined (see the top): where the
    # window holds none the result is scipy's; where it does, float32 ranks
    # NaN as float64 does.
    x = random_array(rng, (9, 70) if ndim == 2 else (5, 6, 40), np.float32)
    x[rng.random(x.shape) < 0.02] = np.nan
    got = gnd.median_filter(x, size, mode="nearest")
    in_double = gnd.median_filter(x.astype(np.float64), size, mode="nearest")
    np.testing.assert_array_equal(got, in_double.astype(np.float32))
    clean = snd.maximum_filter(np.isnan(x).astype(np.uint8), size, mode="nearest") == 0
    assert clean.any()
    np.testing.assert_array_equal(got[clean], snd.median_filter(x, size, mode="nearest")[clean])


@pytest.mark.parametrize("name,args", [("minimum_filter", ()), ("median_filter", ()),
                                       ("correlate", ("weights",)), ("generic_filter", (np.max,))])
def test_footprints_of_a_million_taps_hold_their_offsets_in_one_array(name, args, rng):
    """A footprint's offsets reach the kernels as one int64 array (16 bytes a
    tap here), not a Python int apiece: that took 72 bytes a tap, and a
    MemoryError for footprints of 10**8 cells, which scipy filters. (mode
    nearest: with reflect, scipy reads past its buffers when a footprint is
    this much larger than the array.)"""
    import tracemalloc
    x = random_array(rng, (3, 4), "float64")
    footprint = np.ones((1000, 1000), bool)
    footprint[0, 0] = False  # not a box: the footprint path, not the separable one
    if args == ("weights",):
        call_args, kwargs = (np.where(footprint, rng.random(footprint.shape), 0.0),), {}
    else:
        call_args, kwargs = args, {"footprint": footprint}
    tracemalloc.start()
    try:
        got = getattr(gnd, name)(x, *call_args, mode="nearest", **kwargs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_matches(got, getattr(snd, name)(x, *call_args, mode="nearest", **kwargs))
    weights = 8e6 if args == ("weights",) else 0  # the weights' float64 copy of the taps kept
    assert peak < 34e6 + weights, f"{peak / 1e6:.0f} MB traced"  # offsets 16 MB, np.nonzero's indices 16
