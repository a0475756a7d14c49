"""Passes of any length in the long-pass kernels (src/cuda/fused/long_pass.cuh)
on cupy arrays: a pass of t taps runs in the kernel built for the smallest
bucket of 17, 33 or 65 taps that holds it, laid out with the bucket's other
taps skipped (pad_pass, KindOf::padded), and chains no tile holds (3-D
chains of more than 9 taps a pass, whose first pass runs here before the
planes' tile kernel; any chain of more than 17) run pass by pass in them. Checked against scipy and, bit for bit where the GPU sums in double
or exactly, against gpufilt's own CPU backend, around every bucket's edges,
along every axis, for every kind of pass.
"""
from __future__ import annotations

import numpy as np
import pytest

from gpufilt import ndimage as gnd

from _helpers import assert_matches, check_on_cuda as check, random_array, weights_for

pytestmark = pytest.mark.cuda

cupy = pytest.importorskip("cupy")

DTYPES = ["uint8", "int8", "uint16", "int16", "float16", "float32", "float64"]
MODES = ["reflect", "constant", "nearest", "mirror", "wrap", "grid-wrap"]
# Around each bucket's edges (17, 33, 65) and lengths no tile is built for.
TAPS = [2, 4, 5, 7, 11, 15, 16, 17, 18, 19, 24, 25, 32, 33, 34, 47, 64, 65]


@pytest.mark.parametrize("taps", TAPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_correlate1d_any_length(dtype, taps, rng):
    """Asymmetric weights (laid out at the bucket's end) and symmetric ones
    (centred), along each axis of a volume and a plane, with origins."""
    volume = cupy.asarray(random_array(rng, (35, 22, 150), dtype))
    plane = cupy.asarray(random_array(rng, (140, 90), dtype))
    w = weights_for(rng, dtype, taps)
    for weights in (w, w + w[::-1]):
        for x in (volume, plane):
            axis = int(rng.integers(0, x.ndim))
            origin = int(rng.integers(-(taps // 2), (taps - 1) // 2 + 1))
            check("correlate1d", x, weights, axis=axis, origin=origin, mode=str(rng.choice(MODES)),
                  cval=float(rng.normal()))


@pytest.mark.parametrize("dtype", DTYPES)
def test_lone_9_tap_passes_along_each_axis_of_a_volume(dtype, rng):
    """A lone 9-tap pass along any axis of a volume runs in the long-pass
    kernels (bucket 17, or the minimum and maximum kernels): asymmetric and
    symmetric weights with origins, gaussian derivatives, means, minima and
    maxima, every mode, bit for bit where the CPU's sums are."""
    volume = cupy.asarray(random_array(rng, (30, 21, 140), dtype))
    w = weights_for(rng, dtype, 9)
    for axis in (0, 1, 2):
        for weights in (w, w + w[::-1]):
            check("correlate1d", volume, weights, axis=axis, origin=int(rng.integers(-4, 5)),
                  mode=str(rng.choice(MODES)), cval=float(rng.normal()))
        check("gaussian_filter1d", volume, 1.0, axis=axis, order=axis % 3, mode=str(rng.choice(MODES)))
        check("uniform_filter1d", volume, 9, axis=axis, mode=str(rng.choice(MODES)), exact=False)
        for name in ("minimum_filter1d", "maximum_filter1d"):
            check(name, volume, 9, axis=axis, mode=str(rng.choice(MODES)), cval=float(rng.normal()),
                  origin=int(rng.integers(-4, 5)))


@pytest.mark.parametrize("size", [4, 10, 11, 16, 17, 18, 21, 31, 34, 63])
@pytest.mark.parametrize("dtype", DTYPES)
def test_box_passes_any_size(dtype, size, rng):
    """uniform (integer means divided by the pass's own size, not the
    bucket's), minimum and maximum (starting at the pass's first own tap)."""
    x = cupy.asarray(random_array(rng, (30, 21, 140), dtype))
    for axis in (0, 1, 2):
        mode = str(rng.choice(MODES))
        check("uniform_filter1d", x, size, axis=axis, mode=mode, cval=float(rng.normal()), exact=False)
        check("minimum_filter1d", x, size, axis=axis, mode=mode, cval=float(rng.normal()))
        check("maximum_filter1d", x, size, axis=axis, mode=mode, cval=float(rng.normal()))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gaussian_chains_of_any_sigma(dtype, rng):
    """Chains the tiles are not built for (sigma 0.5 and 1.5: padded, or a
    pass along axis 0 and then the planes; 2.3, 6 and a different sigma per
    axis: pass by pass in the long-pass kernels), derivatives (order 1:
    antisymmetric, summed in double) too."""
    volume = cupy.asarray(random_array(rng, (40, 33, 70), dtype))
    plane = cupy.asarray(random_array(rng, (130, 160), dtype))
    for sigma in (0.5, 1.5, 2.3, 6.0, (1.0, 2.5, 0.7)):
        check("gaussian_filter", volume, sigma, mode=str(rng.choice(MODES)), cval=float(rng.normal()))
    for sigma in (0.5, 1.7, 2.5, 8.0):
        check("gaussian_filter", plane, sigma, mode=str(rng.choice(MODES)))
    check("gaussian_filter", volume, 1.5, order=(1, 0, 1))


@pytest.mark.parametrize("name", ["correlate1d", "uniform_filter1d", "minimum_filter1d", "maximum_filter1d"])
def test_skipped_taps_never_read_non_finite_values(name, rng):
    """A bucket's taps that are not the pass's are skipped, not multiplied by
    zero: infinities and NaN just beyond a pass's reach leave its outputs as
    scipy's (0 * inf would be NaN)."""
    x = random_array(rng, (6, 200), "float32")
    x[:, ::23] = np.inf
    x[:, 11::29] = -np.inf
    x[:, 5::31] = np.nan
    arg = {"correlate1d": rng.standard_normal(5), "uniform_filter1d": 5,
           "minimum_filter1d": 5, "maximum_filter1d": 5}[name]
    got = cupy.asnumpy(getattr(gnd, name)(cupy.asarray(x), arg, axis=1, mode="nearest"))
    on_cpu = getattr(gnd, name)(x, arg, axis=1, mode="nearest")
    np.testing.assert_array_equal(np.isnan(got), np.isnan(on_cpu))
    finite = np.isfinite(on_cpu)
    assert_matches(got[finite], on_cpu[finite])
    np.testing.assert_array_equal(got[~finite], on_cpu[~finite])


BOX_SIZES = [2, 5, 7, 8, 9, 16, 21, 40, 65]


@pytest.mark.parametrize("size", BOX_SIZES)
@pytest.mark.parametrize("name", ["minimum_filter1d", "maximum_filter1d"])
def test_box_extremes_order_of_nan_and_signed_zeros(name, size, rng):
    """NaN, infinities and signed zeros anywhere in windows of any size: the
    CPU's running comparison, bit for bit (a window whose first tap is NaN
    gives that NaN, other NaN lose to every number, the first of equal
    values wins), along the column and the row kernels."""
    x = rng.choice(np.array([-1.0, -0.0, 0.0, 1.0, np.inf, -np.inf, np.nan, 2.0]), size=(37, 300))
    for dtype in ("float32", "float64", "float16"):
        host = x.astype(dtype)
        for axis in (0, 1):
            for mode in ("nearest", "constant", "wrap"):
                origin = int(rng.integers(-(size // 2), (size - 1) // 2 + 1))
                kwargs = dict(axis=axis, mode=mode, cval=-0.0, origin=origin)
                got = cupy.asnumpy(getattr(gnd, name)(cupy.asarray(host), size, **kwargs))
                on_cpu = getattr(gnd, name)(host, size, **kwargs)
                np.testing.assert_array_equal(got, on_cpu)
                np.testing.assert_array_equal(np.signbit(got), np.signbit(on_cpu))


def _direct_means(x, size, axis, mode, cval):
    """Each window's mean summed directly in float64 (no running sum)."""
    pad_mode = {"nearest": "edge", "wrap": "wrap", "reflect": "symmetric", "mirror": "reflect",
                "constant": "constant"}[mode]
    widths = [(0, 0)] * x.ndim
    widths[axis] = (size // 2, size - 1 - size // 2)
    extra = {"constant_values": cval} if mode == "constant" else {}
    padded = np.pad(x.astype(np.float64), widths, mode=pad_mode, **extra)
    windows = np.lib.stride_tricks.sliding_window_view(padded, size, axis=axis)
    with np.errstate(invalid="ignore"):
        return windows.sum(axis=-1) / size


@pytest.mark.parametrize("size", BOX_SIZES)
def test_box_means_of_non_finite_values(size, rng):
    """Each mean is the window's direct sum's: inf, -inf or NaN only while
    they are in the window (a running sum would carry NaN on after an
    infinity left it)."""
    x = rng.standard_normal((37, 300))
    x[rng.random(x.shape) < 0.02] = np.inf
    x[rng.random(x.shape) < 0.02] = -np.inf
    x[rng.random(x.shape) < 0.01] = np.nan
    for dtype in ("float32", "float64"):
        host = x.astype(dtype)
        for axis in (0, 1):
            for mode in ("nearest", "constant", "reflect"):
                got = cupy.asnumpy(gnd.uniform_filter1d(cupy.asarray(host), size, axis=axis, mode=mode, cval=0.5))
                want = _direct_means(host, size, axis, mode, 0.5).astype(dtype)
                np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
                np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
                finite = np.isfinite(want)
                assert_matches(got[finite], want[finite])


@pytest.mark.parametrize("dtype", ["uint8", "int16"])
def test_box_means_of_integers_with_a_fractional_cval(dtype, rng):
    """Integer data with a cval that is not an integer: scipy's means."""
    x = cupy.asarray(random_array(rng, (30, 140), dtype))
    for axis in (0, 1):
        check("uniform_filter1d", x, 21, axis=axis, mode="constant", cval=0.3, exact=False)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
def test_box_extremes_of_integers_with_any_cval(dtype, rng):
    """Integers are compared as int32 with cval stored as the dtype stores
    it: a fractional cval truncated, one beyond the dtype's range left to
    the line kernels (scipy wraps the extreme, not the cval)."""
    x = cupy.asarray(random_array(rng, (40, 150), dtype))
    info = np.iinfo(dtype)
    for cval in (2.7, -3.5, float(info.max) + 40, float(info.min) - 0.5):
        for size in (21, 40):
            for axis in (0, 1):
                check("minimum_filter1d", x, size, axis=axis, mode="constant", cval=cval)
                check("maximum_filter1d", x, size, axis=axis, mode="constant", cval=cval)
