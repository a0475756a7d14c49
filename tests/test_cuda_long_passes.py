"""Passes of any length in the long-pass kernels (src/cuda/fused/long_pass.cuh)
on cupy arrays: a pass of t taps runs in the kernel built for the smallest
bucket of 17, 33 or 65 taps that holds it, laid out with the bucket's other
taps skipped (pad_pass, KindOf::padded), and chains the fused tiles are not
built for (taps other than 3 and 9, or 17 on a 2-D array) run pass by pass
in them. Checked against scipy and, bit for bit where the GPU sums in double
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
    """Chains the tiles are not built for (sigma 0.5, 1.5, 2.3, 6 and a
    different sigma per axis) run pass by pass in the long-pass kernels;
    derivatives (order 1: antisymmetric, summed in double) too."""
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
