"""The fused separable kernels (src/cuda/fused.cu, src/cuda/fused/) on cupy
arrays: 2-D and 3-D chains of up to one pass per axis in axis order, filters
up to 17 taps per axis, one dtype in and out (chains of tap counts the tiles
are not built for are padded into them, or split into a pass along axis 0
and a stack of planes; longer ones run pass by pass in the long-pass
kernels: see test_cuda_long_passes.py). Each case is checked against scipy and,
exactly, against gpufilt's own CPU backend (which sums the taps in scipy's
order), so a halo, ring or rounding slip shows up in the last bit.

float32 and float16 data are summed in float on the GPU (double on the CPU):
those are compared within DESIGN.md's tolerance instead of bit for bit.

Shapes are chosen around the kernel's tiles (64 x 16 and 256 columns, marches
of 32 planes): partial tiles, single rows and planes, halos longer than the
array. Chains the kernel declines (other layouts, longer filters, other
orders, dtype conversions) are checked too: they must give the same results
through the pass-by-pass kernels.
"""
from __future__ import annotations

import numpy as np
import pytest

from gpufilt import ndimage as gnd

from _helpers import assert_matches, check_on_cuda as check, random_array, scipy_reference, weights_for

pytestmark = pytest.mark.cuda

cupy = pytest.importorskip("cupy")

DTYPES = ["uint8", "int8", "int16", "uint16", "int32", "int64", "float16", "float32", "float64"]
SHAPES_3D = [(37, 45, 70), (3, 2, 1), (70, 9, 3), (1, 20, 130), (40, 17, 65)]
SHAPES_2D = [(300, 5), (5, 300), (129, 257), (1, 1), (33, 1)]
FILTER_MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]
MIN_MAX = ("minimum_filter", "maximum_filter")


def per_axis_modes(rng, ndim):
    return [str(m) for m in rng.choice(FILTER_MODES, ndim)]


def random_origins(rng, sizes):
    """An origin within each window of `sizes`."""
    return [int(rng.integers(-(s // 2), (s - 1) // 2 + 1)) for s in sizes]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES_3D + SHAPES_2D)
def test_gaussian_filter(shape, dtype, rng):
    x = cupy.asarray(random_array(rng, shape, dtype))
    sigma = list(rng.uniform(0.4, 2.0, len(shape)))  # at most 17 taps
    check("gaussian_filter", x, sigma, mode=per_axis_modes(rng, len(shape)), cval=float(rng.normal()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES_3D + SHAPES_2D)
def test_uniform_filter(shape, dtype, rng):
    x = cupy.asarray(random_array(rng, shape, dtype))
    size = [int(s) for s in rng.integers(1, 10, len(shape))]
    origin = random_origins(rng, size)
    check("uniform_filter", x, size, origin=origin, mode=per_axis_modes(rng, len(shape)),
          cval=float(rng.normal()), exact=False)


@pytest.mark.parametrize("name", MIN_MAX)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES_3D + SHAPES_2D)
def test_minimum_maximum_filter(shape, dtype, name, rng):
    x = cupy.asarray(random_array(rng, shape, dtype))
    size = [int(s) for s in rng.integers(1, 8, len(shape))]
    check(name, x, size=size, mode=per_axis_modes(rng, len(shape)), cval=float(rng.normal()))


@pytest.mark.parametrize("taps", [3, 9])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(37, 45, 70), (3, 2, 1), (70, 9, 3), (1, 20, 130), (66, 17, 129)])
def test_three_passes_of_3_or_9_taps(shape, dtype, taps, rng):
    """Chains of three 9-tap passes over a 3-D float32/float16 array take the
    register-blocked kernel (64 x 8 tiles, 4 planes a step), other dtypes and
    3-tap chains fused_kernel: partial tiles and steps, axes shorter than the
    halo, every mode, through both."""
    x = cupy.asarray(random_array(rng, shape, dtype))
    modes, cval = per_axis_modes(rng, 3), float(rng.normal())
    check("gaussian_filter", x, 1.0 if taps == 9 else 0.25, mode=modes, cval=cval)  # radius 4 or 1
    origin = random_origins(rng, [taps] * 3)
    check("uniform_filter", x, taps, origin=origin, mode=modes, cval=cval, exact=False)
    for name in MIN_MAX:
        check(name, x, size=taps, mode=modes, cval=cval)


PLANE_SHAPES = [(150, 300), (64, 112), (65, 125), (1, 500), (300, 1), (2, 3), (33, 129)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", PLANE_SHAPES)
def test_2d_chains_of_3_9_17_taps(shape, dtype, rng):
    """2-D chains whose passes share 3, 9 or 17 taps take the tile kernel
    (plane_kernel: tiles of 64 or 32 rows by 112 to 124 columns): partial
    tiles, halos longer than the array, every mode per axis, one pass alone,
    sums in float (smoothing float32/float16) and in double (derivatives,
    integers, float64)."""
    x = cupy.asarray(random_array(rng, shape, dtype))
    modes, cval = per_axis_modes(rng, 2), float(rng.normal())
    for sigma in (0.25, 1.0, 2.0):  # radius 1, 4 and 8
        check("gaussian_filter", x, sigma, mode=modes, cval=cval)
        axis = int(rng.integers(0, 2))
        check("gaussian_filter1d", x, sigma, axis=axis, mode=modes[axis], cval=cval)
    for size in (3, 9):
        check("uniform_filter", x, size, mode=modes, cval=cval, exact=False)
    for name in MIN_MAX:
        check(name, x, size=3, mode=modes, cval=cval)
    if dtype in ("int32", "int64"):  # keep 8 * |x| in range: scipy's overflow is its C cast's
        x //= 16
    check("sobel", x, axis=int(rng.integers(0, 2)), mode=modes, cval=cval)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(37, 45, 70), (3, 2, 1), (66, 17, 129), (1, 20, 130)])
def test_3d_chains_padded_to_9_taps(shape, dtype, rng):
    """3-D chains of three passes of 2 to 9 taps that no tile is built for
    (gaussian sigma 0.4 to 1.1: 5 and 7 taps; box sizes 2 to 8; a size per
    axis) run in blocked_kernel's 9 taps, each pass padded (centred, or at
    the end with its origin), its extra taps skipped; the dtypes
    blocked_kernel does not take run pass by pass."""
    x = cupy.asarray(random_array(rng, shape, dtype))
    modes, cval = per_axis_modes(rng, 3), float(rng.normal())
    for sigma in (0.5, 0.8, [0.4, 1.0, 0.6]):
        check("gaussian_filter", x, sigma, mode=modes, cval=cval)
    for size in ([4, 4, 4], [2, 5, 8], [6, 3, 7]):
        origin = random_origins(rng, size)
        check("uniform_filter", x, size, origin=origin, mode=modes, cval=cval, exact=False)
        for name in MIN_MAX:
            check(name, x, size=size, origin=origin, mode=modes, cval=cval)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", PLANE_SHAPES)
def test_2d_chains_padded_to_9_or_17_taps(shape, dtype, rng):
    """2-D chains of up to 17 taps that no tile is built for (gaussian sigma
    0.5: 5 taps, 1.2 to 1.8: 11 to 15; box sizes 4 to 16) run in
    plane_kernel's 9 or 17 taps, each pass padded, its extra taps skipped."""
    x = cupy.asarray(random_array(rng, shape, dtype))
    modes, cval = per_axis_modes(rng, 2), float(rng.normal())
    for sigma in (0.5, 1.2, 1.5, [0.6, 1.8]):
        check("gaussian_filter", x, sigma, mode=modes, cval=cval)
    for size in ([4, 4], [12, 12], [5, 16], [11, 6]):
        origin = random_origins(rng, size)
        check("uniform_filter", x, size, origin=origin, mode=modes, cval=cval, exact=False)
        for name in MIN_MAX:
            check(name, x, size=size, origin=origin, mode=modes, cval=cval)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(37, 45, 70), (3, 2, 1), (5, 66, 129), (2, 20, 1030)])
def test_3d_chains_without_an_axis0_pass(shape, dtype, rng):
    """3-D chains along axes 1 and 2 only (a stack of images each filtered
    alone: sigma (0, s, s)) run over each plane in plane_kernel, as the
    split chains' second part, at 3 to 17 taps (padded where no tile is built
    for them); longer ones and the dtypes plane_kernel does not take run
    pass by pass."""
    x = cupy.asarray(random_array(rng, shape, dtype))
    modes, cval = per_axis_modes(rng, 3), float(rng.normal())
    for sigma in ([0, 0.5, 0.5], [0, 1.0, 1.0], [0, 1.5, 0.8], [0, 4.0, 4.0]):
        check("gaussian_filter", x, sigma, mode=modes, cval=cval)
    check("gaussian_filter", x, [0, 1.0, 1.0], order=[0, 1, 0], mode=modes, cval=cval)
    for size in ([1, 3, 3], [1, 9, 4], [1, 12, 17]):
        origin = random_origins(rng, size)
        check("uniform_filter", x, size, origin=origin, mode=modes, cval=cval, exact=False)
        for name in MIN_MAX:
            check(name, x, size=size, origin=origin, mode=modes, cval=cval)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_3d_derivative_chains_of_9_taps(dtype, rng):
    """Chains of sigma 1 with a derivative (three passes of 9 taps summed in
    double, which blocked_kernel does not take) run split: their pass along
    axis 0 alone, then the planes; float32 and float64 bit for bit with the
    CPU, which sums them in double too (float16's split is declined:
    spills_in_plane_kernel)."""
    x = cupy.asarray(random_array(rng, (37, 66, 128), dtype))
    host = cupy.asnumpy(x)
    for order in ([1, 0, 0], [0, 2, 0], [0, 0, 1], [2, 1, 0]):
        mode = per_axis_modes(rng, 3)
        got = cupy.asnumpy(gnd.gaussian_filter(x, 1.0, order=order, mode=mode))
        on_cpu = gnd.gaussian_filter(host, 1.0, order=order, mode=mode)
        if dtype == "float16":
            assert_matches(got, on_cpu)
        else:
            np.testing.assert_array_equal(got, on_cpu, err_msg=str(order))


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("shape", [(200, 1024), (4, 200, 1024)])
def test_padded_8bit_chains_from_staged_input(shape, dtype, rng):
    """8-bit rows whose length is a multiple of 8 are staged in shared memory
    by plane_kernel (stages_input), and its outputs near an integer summed
    again from there (settle_from_staged): padded chains (sigma 0.5 and 1.5)
    on an image and on a volume's planes (the split chain), with flat bands
    that put many sums near an integer; bit for bit with the CPU."""
    host = random_array(rng, shape, dtype)
    host[..., 300:420] = 77
    x = cupy.asarray(host)
    for sigma in (0.5, 1.5):
        check("gaussian_filter", x, sigma, mode="reflect")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, sigma, size, spacing",
                         [((30, 40, 70), 0.5, [4, 6, 2], 3000), ((30, 40, 70), 1.5, [12, 5, 14], 5000),
                          ((150, 300), 1.5, [12, 5], 1800), ((150, 300), 0.5, [4, 6], 600)])
def test_padded_chains_never_read_non_finite_values(shape, sigma, size, spacing, dtype, rng):
    """The taps a padded chain skips are never multiplied by zero: infinities
    and NaN just beyond each pass's reach leave the outputs as the CPU's
    (3-D chains in blocked_kernel and split into planes, 2-D chains padded to
    17 and to 9 taps; sums in float and in double). One value in about
    spacing / 3 is not finite: most windows hold none, and many of the padded
    windows one."""
    x = random_array(rng, shape, dtype)
    flat = x.reshape(-1)
    flat[::spacing] = np.inf
    flat[spacing // 2::spacing + 7] = -np.inf
    flat[spacing // 3::spacing + 13] = np.nan
    calls = [("gaussian_filter", (sigma,), {}), ("uniform_filter", (size,), {}),
             ("minimum_filter", (), {"size": size}), ("maximum_filter", (), {"size": size})]
    for name, args, kwargs in calls:
        got = cupy.asnumpy(getattr(gnd, name)(cupy.asarray(x), *args, mode="nearest", **kwargs))
        on_cpu = getattr(gnd, name)(x, *args, mode="nearest", **kwargs)
        if name == "uniform_filter" and dtype == "float64":
            # The CPU keeps scipy's running sum for float64 means, which an
            # infinity turns to NaN for the rest of its line (inf - inf); the
            # GPU sums each window (as cupyx): compare with window sums.
            on_cpu = x
            for axis, n in enumerate(size):
                on_cpu = gnd.correlate1d(on_cpu, np.full(n, 1.0 / n), axis, mode="nearest")
        np.testing.assert_array_equal(np.isnan(got), np.isnan(on_cpu), err_msg=name)
        finite = np.isfinite(on_cpu)
        assert_matches(got[finite], on_cpu[finite])
        np.testing.assert_array_equal(got[~finite], on_cpu[~finite], err_msg=name)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
@pytest.mark.parametrize("mode", FILTER_MODES)
def test_2d_small_integer_fast_sums(mode, dtype, rng):
    """Correlations of the tile kernel over 8-bit data sum in float within
    a margin of scipy's double sum, and again in double where the margin
    holds an integer step (in tiles inside the array from the staged input,
    at the borders from registers); over 16-bit data in double, as scipy.
    Flat regions (sums landing on integers), edges, an integer cval (a
    fractional one takes double sums), dyadic weights (no margin), weights
    without symmetry. Chains of box filters are held in int32 (8-bit ones of
    minima and maxima in float). Bit for bit the CPU's results."""
    info = np.iinfo(dtype)
    host = random_array(rng, (150, 300), dtype)
    host[20:90, 30:200] = 77
    host[100:, :60] = np.where(rng.integers(0, 2, (50, 60)) == 1, info.max, info.min)
    x = cupy.asarray(host)
    for sigma in (0.25, 1.0, 2.0):
        check("gaussian_filter", x, sigma, mode=mode, cval=3.0)
        check("gaussian_filter", x, sigma, mode=mode, cval=2.5)
    check("sobel", x, axis=0, mode=mode, cval=float(info.max))
    check("correlate1d", x, [0.25, 0.5, 0.25], axis=1, mode=mode, cval=4.0)  # dyadic: exact in float
    check("correlate1d", x, [0.3, -0.7, 1.9], axis=0, mode=mode, cval=5.0)
    check("minimum_filter", x, size=9, mode=mode, cval=7.0)
    check("uniform_filter", x, [3, 9], mode=mode, cval=6.0)  # held in int32: exact


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
@pytest.mark.parametrize("mode", FILTER_MODES)
def test_3d_small_integer_box_chains_held_in_int32(mode, dtype, rng):
    """3-D chains of uniform, minimum or maximum passes over 8-bit and 16-bit
    data are held in int32 (fused_kernel with the kind fixed, size 9 in
    blocked_kernel; uniform sizes divided as integers where compiled, in
    double where known at run time) where cval is an integer of the dtype's
    range, with extreme values: bit for bit the CPU's results."""
    info = np.iinfo(dtype)
    host = random_array(rng, (37, 45, 70), dtype)
    host[:, 10:20] = info.max
    host[5:9] = info.min
    x = cupy.asarray(host)
    for size in (3, 9, [2, 5, 3]):
        check("uniform_filter", x, size, mode=mode, cval=7.0)
        check("maximum_filter", x, size=size, mode=mode, cval=float(info.min + 3))
        check("minimum_filter", x, size=size, mode=mode, cval=5.0)


@pytest.mark.parametrize("mode", FILTER_MODES)
@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
def test_3d_small_integer_correlations_held_in_int32(mode, dtype, rng):
    """3-D correlation chains over 8-bit and 16-bit data are held in int32
    and summed in double (fused_kernel: gaussians with their symmetric pairs
    fixed, for 9 taps, other tap counts pass by pass; sobel and prewitt
    with signed pairs; asymmetric weights with the kind switched), where cval
    is an integer of the dtype's range, and in double otherwise: extreme
    values and a flat band, bit for bit the CPU's results."""
    info = np.iinfo(dtype)
    host = random_array(rng, (37, 45, 70), dtype)
    host[:, 10:20] = info.max
    host[5:9] = info.min
    host[20:30, 25:] = 77
    x = cupy.asarray(host)
    for sigma in (1.0, 2.0, 0.7, [1.5, 1.0, 0.6]):
        check("gaussian_filter", x, sigma, mode=mode, cval=float(info.min + 1))
    check("gaussian_filter", x, 1.0, mode=mode, cval=2.5)  # cval not an integer: held in double
    for axis in range(3):
        check("sobel", x, axis=axis, mode=mode, cval=3.0)
        check("prewitt", x, axis=axis, mode=mode)
    check("correlate1d", x, [0.25, -1.5, 0.125, 2.0], axis=1, mode=mode, cval=4.0)


@pytest.mark.parametrize("mode", FILTER_MODES)
@pytest.mark.parametrize("shape", [(37, 45, 70), (300, 270)])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
def test_small_integer_chains_with_integer_weights(dtype, shape, mode, rng):
    """Correlations with integer weights over 8-bit and 16-bit data (sobel,
    prewitt, integer correlate1d) are summed in int32: 3-D fused_kernel with
    signed pairs fixed, the 2-D tiles, single passes of 3 and 9 taps. Sums
    that leave the dtype wrap as scipy's do, extreme values and a flat band
    included; weights too large for int32 sums take double. Along later
    axes the passes run in axis order, which gives the same wrapped sums,
    but for a constant mode with a cval other than 0. Bit for bit the CPU's
    results, and scipy's."""
    info = np.iinfo(dtype)
    host = random_array(rng, shape, dtype)
    host[..., 10:20] = info.max
    host[5:9] = info.min
    host[20:30, 25:] = 77
    x = cupy.asarray(host)
    # Integer weights whose sums int32 is not proven to hold (they take
    # double), with every result still within int32 (scipy's casts).
    too_large_for_int32 = [9000, 2000, -9000] if info.bits == 16 else [70000, 1, -70000]
    for axis in range(x.ndim):
        check("sobel", x, axis=axis, mode=mode, cval=float(info.min + 1))
        check("prewitt", x, axis=axis, mode=mode, cval=3.0)
        check("sobel", x, axis=axis, mode=mode, cval=2.5)  # cval not an integer: double
        check("prewitt", x, axis=axis, mode=mode)  # cval 0: out of axis order, the passes commute
        check("correlate1d", x, [2, -7, 1], axis=axis, mode=mode, cval=4.0)
        check("convolve1d", x, [1, 3, -3, 5, 0, 2, 1, -1, 4], axis=axis, mode=mode)
        check("correlate1d", x, too_large_for_int32, axis=axis, mode=mode)


@pytest.mark.parametrize("shape", [(33, 40, 75), (300, 270)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "uint8", "int8", "uint16", "int16"])
def test_box_chains_of_any_size(shape, dtype, rng):
    """Box chains of sizes 5 and 7 (compiled: fused_kernel with the kind
    fixed, the 2-D tiles) and of mixed sizes (known at run time): every
    mode, the 2-D tiles' interior and border blocks."""
    info = np.iinfo(dtype) if dtype[0] in "ui" else None
    x = cupy.asarray(random_array(rng, shape, dtype))
    cval = float(info.min + 2) if info else -0.5
    for mode in FILTER_MODES:
        for size in (5, 7, [7, 5, 11][: len(shape)]):
            check("uniform_filter", x, size, mode=mode, cval=cval)
            check("maximum_filter", x, size=size, mode=mode, cval=cval)
            check("minimum_filter", x, size=size, mode=mode, cval=cval)


@pytest.mark.parametrize("shape", [(33, 40, 75), (300, 270)])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "float16"])
def test_box_chains_with_a_cval_outside_the_dtype(shape, dtype, rng):
    """A constant mode whose cval is no value of the dtype (below an unsigned
    dtype's zero, past a signed one's maximum, or not a float16): a pass's
    minima, maxima and means then leave the dtype and must be stored as
    scipy stores them (wrapped, rounded) before the next pass reads them,
    and an unsigned dtype's sums may be negative. Box chains that read only
    values of their dtype skip both (fused_kernel with the kind fixed)."""
    cval = {"uint8": -5.0, "uint16": -300.0, "int8": 128.0, "int16": 32768.0, "float16": 0.1}[dtype]
    x = cupy.asarray(random_array(rng, shape, dtype))
    for size in (3, 5, [3, 5, 7][: len(shape)]):
        check("uniform_filter", x, size, mode="constant", cval=cval)
        check("maximum_filter", x, size=size, mode="constant", cval=cval)
        check("minimum_filter", x, size=size, mode="constant", cval=cval)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
def test_long_passes_small_integer_fast_sums(dtype, rng):
    """The long-pass kernels (25 and 33 taps, along either axis) sum 8-bit
    and 16-bit data as the tiles do: flat bands and extreme values, summed
    again in scipy's order near a step; bit for bit the CPU's results."""
    info = np.iinfo(dtype)
    host = random_array(rng, (160, 330), dtype)
    host[40:100, :] = 77
    host[:, 200:260] = info.max
    host[120:, :40] = np.where(rng.integers(0, 2, (40, 40)) == 1, info.max, info.min)
    x = cupy.asarray(host)
    for axis in (0, 1):
        for sigma in (3.0, 4.0):
            check("gaussian_filter1d", x, sigma, axis=axis, mode="constant", cval=-2.0)
            check("gaussian_filter1d", x, sigma, axis=axis, mode="reflect", order=1)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_eight_bit_correlations_of_any_weights(dtype, rng):
    """8-bit correlations sum in float within a margin of scipy's double sum
    (the 2-D tiles, blocked_kernel's 9-tap 3-D chains, the long passes) and
    again in double near a step. Weights with and without symmetry, not
    summing to 1, small and large (a wider margin: more outputs summed
    again), negative ones, flat regions whose sums land on integers, extreme
    values; symmetric passes whose sums stay in the dtype skip the wrap back
    into it (FusedPass::in_range), those whose sums or cval leave it keep it.
    Bit for bit the CPU's results."""
    info = np.iinfo(dtype)
    plane = random_array(rng, (140, 270), dtype)
    plane[30:80, 40:200] = 77
    plane[100:, :50] = np.where(rng.integers(0, 2, (40, 50)) == 1, info.max, info.min)
    volume = random_array(rng, (36, 41, 70), dtype)
    volume[:, 10:18] = info.max
    volume[20:26] = 77
    outside = -200.0 if dtype == "uint8" else 128.0  # a cval beyond the dtype, within its magnitude
    for taps in (9, 17, 25):
        w = rng.uniform(0.0, 1.0, taps)
        even = w + w[::-1]
        for weights in (w / w.sum(), 1.7 * w / w.sum(), w - 0.3 * w.mean(), 9.0 * w / w.sum(),
                        even / even.sum(), 1.02 * even / even.sum()):
            for axis in (0, 1):
                check("correlate1d", cupy.asarray(plane), weights, axis=axis, mode="reflect")
                for cval in (float(info.min + 2), outside):
                    check("correlate1d", cupy.asarray(plane), weights, axis=axis, mode="constant", cval=cval)
    for sigma in (1.0, [1.0, 1.0, 1.0]):
        check("gaussian_filter", cupy.asarray(volume), sigma, mode="nearest")
        check("gaussian_filter", cupy.asarray(volume), sigma, mode="constant", cval=float(info.max - 1))
        check("gaussian_filter", cupy.asarray(volume), sigma, mode="constant", cval=outside)
    check("gaussian_filter", cupy.asarray(plane), 2.0, mode="constant", cval=outside)
    check("gaussian_filter", cupy.asarray(volume), 1.0, order=[0, 1, 0], mode="mirror")
    check("gaussian_filter", cupy.asarray(plane), 2.0, order=[1, 0], mode="wrap")


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
def test_2d_small_integers_many_tiles(dtype, rng):
    """Hundreds of tiles inside the array (staged input; for 8-bit data the
    outputs near a step summed again from it) and a flat band: bit for bit
    the CPU's."""
    host = random_array(rng, (700, 900), dtype)
    host[300:380] = 101
    x = cupy.asarray(host)
    for sigma in (0.7, 1.5, 2.0):
        check("gaussian_filter", x, sigma)


@pytest.mark.parametrize("view", ["reversed", "sliced", "unaligned_output"])
def test_2d_tile_layouts(view, rng):
    """Outputs whose rows do not take aligned runs of four are stored element
    by element; reversed and strided inputs are read in place."""
    base = random_array(rng, (150, 301), "float32")
    x = cupy.asarray(base)
    if view == "reversed":
        x = x[::-1, ::-1]
    elif view == "sliced":
        x = x[1::2, ::3]
    host = cupy.asnumpy(x)
    out = cupy.empty((x.shape[0], x.shape[1] + 1), np.float32)[:, 1:]
    got = gnd.gaussian_filter(x, 2.0, output=out if view == "unaligned_output" else None)
    assert_matches(cupy.asnumpy(got), scipy_reference("gaussian_filter", host, 2.0))


def test_minimum_maximum_filter_nan(rng):
    """Where NaN wins is decided by the comparison rule: the fused kernel keeps
    the line kernels' (and the CPU's) to the bit."""
    host = random_array(rng, (20, 30, 40), "float32")
    host[rng.random(host.shape) < 0.05] = np.nan
    for name in MIN_MAX:
        got = getattr(gnd, name)(cupy.asarray(host), size=3)
        np.testing.assert_array_equal(cupy.asnumpy(got), getattr(gnd, name)(host, size=3))


@pytest.mark.parametrize("name", ["sobel", "prewitt"])
@pytest.mark.parametrize("dtype", ["int16", "float32", "float64"])
def test_edge_filters_along_axis0(name, dtype, rng):
    x = cupy.asarray(random_array(rng, (33, 40, 70), dtype))
    check(name, x, axis=0, mode=per_axis_modes(rng, 3))


@pytest.mark.parametrize("taps", [1, 2, 5, 16, 17])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64"])
def test_correlate1d_single_axis(dtype, axis, taps, rng):
    x = cupy.asarray(random_array(rng, (35, 20, 70), dtype))
    w = weights_for(rng, dtype, taps)
    origin = int(rng.integers(-(taps // 2), (taps - 1) // 2 + 1))
    check("correlate1d", x, w, axis=axis, origin=origin, mode=str(rng.choice(FILTER_MODES)),
          cval=float(rng.normal()))


@pytest.mark.parametrize("mode", FILTER_MODES)
def test_halo_longer_than_the_array(mode, rng):
    """17 taps over axes of 2 and 3 elements: every extension repeats."""
    x = cupy.asarray(random_array(rng, (3, 2, 40), "float64"))
    check("gaussian_filter", x, 2.0, mode=mode, cval=1.5)


@pytest.mark.parametrize("view", ["sliced", "reversed", "fortran", "transposed"])
def test_layouts(view, rng):
    """Strided and reversed views stay on the fused path; layouts whose last
    axis is not the innermost go pass by pass. Both must match."""
    base = cupy.asarray(random_array(rng, (40, 50, 90), "float32"))
    x = {"sliced": base[::2, 1:, ::3], "reversed": base[::-1, :, ::-1],
         "fortran": cupy.asfortranarray(base), "transposed": base.transpose(2, 0, 1)}[view]
    check("gaussian_filter", x, [1.0, 0.6, 1.5], mode="mirror")


def test_output_view_and_dtype(rng):
    """A preallocated strided output, and an output dtype other than the input's
    (declined by the fused kernel: it rounds between passes in one dtype)."""
    host = random_array(rng, (30, 40, 50), "uint8")
    x = cupy.asarray(host)
    out = cupy.zeros((30, 40, 100), np.float32)[:, :, ::2]
    gnd.gaussian_filter(x, 1.2, output=out)
    assert_matches(cupy.asnumpy(out), scipy_reference("gaussian_filter", host, 1.2, output=np.float32))
    same = cupy.empty((60, 40, 50), np.uint8)[::2]
    gnd.uniform_filter(x, 5, output=same)
    assert_matches(cupy.asnumpy(same), scipy_reference("uniform_filter", host, 5))


@pytest.mark.parametrize("name", ["sobel", "prewitt"])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "float16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(129, 257), (16, 128), (300, 5), (5, 300), (1, 1), (33, 1),
                                   (40, 17, 65), (20, 35, 140), (3, 2, 1)])
def test_edge_filters_along_later_axes(name, dtype, shape, rng):
    """sobel and prewitt along an axis after the first (the default, -1),
    whose passes are out of axis order: along the last axis by
    rows_first_kernel (2-D, tiles of 16 x 128) and columns_first_kernel
    (3-D, tiles of 16 x 64 marching along axis 0), partial tiles and halos
    longer than the array; along axis 1 of a volume by fused_kernel over
    its axes 0 and 1 swapped. Every mode per axis; integer cvals (8-bit and
    16-bit data summed in int32) and others. In place, where those kernels
    would read what they write: 2-D pass by pass, 3-D the first pass alone
    into a temporary and the rest fused from it."""
    host = random_array(rng, shape, dtype)
    x = cupy.asarray(host)
    modes = per_axis_modes(rng, len(shape))
    cvals = (3.0, -1.5) if dtype[0] in "ui" else (float(rng.normal()),)
    for axis in range(1, len(shape)):
        for cval in cvals:
            check(name, x, axis=axis, mode=modes, cval=cval)
    in_place = getattr(gnd, name)(x, output=x, mode=modes)
    assert in_place is x
    assert_matches(cupy.asnumpy(x), scipy_reference(name, host, mode=modes))


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64"])
def test_longer_filters_and_other_orders(dtype, rng):
    """Chains the fused kernel declines as a whole run pass by pass, each pass
    in a long-pass kernel (up to 33 taps summed in double, 65 in float), in
    the line kernels beyond: sigma 3, 4 and 5 (25, 33 and 41 taps), sobel
    along the last axis (passes 2, 0, 1)."""
    x = cupy.asarray(random_array(rng, (30, 40, 50), dtype))
    for sigma in (3.0, 4.0, 5.0):
        check("gaussian_filter", x, sigma, mode=per_axis_modes(rng, 3))
    check("sobel", x, axis=-1)


@pytest.mark.parametrize("taps", [18, 25, 33, 34])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_correlate1d_long_filters(axis, taps, rng):
    x = cupy.asarray(random_array(rng, (40, 37, 70), "float32"))
    w = weights_for(rng, "float32", taps)
    check("correlate1d", x, w, axis=axis, mode=str(rng.choice(FILTER_MODES)), cval=0.5)


LONG_SHAPES = [(40, 37, 70), (3, 2, 150), (1, 300, 5), (260, 3, 33), (150, 300), (40, 1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", LONG_SHAPES)
def test_long_single_passes(shape, dtype, rng):
    """Single passes of 25 and 33 taps (gaussian sigma 3 and 4) take the
    column kernel (along an axis but the last) or the row kernel (along the
    last), in their bucket of 33 taps: every axis, kind, mode and dtype,
    halos longer than the axis."""
    x = cupy.asarray(random_array(rng, shape, dtype))
    for axis in range(len(shape)):
        mode, cval = str(rng.choice(FILTER_MODES)), float(rng.integers(-3, 4))
        for sigma in (3.0, 4.0):
            check("gaussian_filter1d", x, sigma, axis=axis, mode=mode, cval=cval)
        w = weights_for(rng, dtype, 33)
        origin = int(rng.integers(-16, 17))
        check("correlate1d", x, w, axis=axis, origin=origin, mode=mode, cval=cval)
        check("uniform_filter1d", x, 25, axis=axis, mode=mode, cval=cval, exact=False)
        check("maximum_filter1d", x, 33, axis=axis, mode=mode, cval=cval)


def test_in_place_output(rng):
    """output=x: the fused kernel declines overlapping arrays."""
    host = random_array(rng, (20, 30, 40), "float64")
    x = cupy.asarray(host)
    gnd.gaussian_filter(x, 1.0, output=x)
    assert_matches(cupy.asnumpy(x), scipy_reference("gaussian_filter", host, 1.0))


# ------------------------------------------------------------------ laplace

LAPLACE_DTYPES = DTYPES + ["int8", "uint32", "bool"]  # int32, int64 and these run pass by pass


@pytest.mark.parametrize("dtype", LAPLACE_DTYPES)
@pytest.mark.parametrize("shape", SHAPES_3D + SHAPES_2D)
def test_laplace_in_one_pass(shape, dtype, rng):
    """The one-pass kernel: each second difference rounded to the dtype and
    summed in it (integers wrap) as generic_laplace does, every mode per axis."""
    host = random_array(rng, shape, dtype)
    if dtype == "int32":  # keep 4 * |x| within int32: beyond it scipy's C cast and gpufilt's differ
        host //= 8        # (INT32_MIN against a wrap through int64), on the CPU as on the GPU
    check("laplace", cupy.asarray(host), mode=per_axis_modes(rng, len(shape)), cval=float(rng.integers(-3, 4)))


def test_laplace_output_forms(rng):
    """An output array of the input's dtype is written in one pass; another
    dtype, the input itself and an axes subset go the pass-by-pass way."""
    host = random_array(rng, (20, 30, 40), "float32")
    x = cupy.asarray(host)
    want = scipy_reference("laplace", host)
    out = cupy.empty((20, 30, 80), np.float32)[:, :, ::2]
    assert gnd.laplace(x, output=out) is out
    assert_matches(cupy.asnumpy(out), want)
    assert_matches(cupy.asnumpy(gnd.laplace(x, output=np.float64)),
                   scipy_reference("laplace", host, output=np.float64))
    assert_matches(cupy.asnumpy(gnd.laplace(x, axes=(0, 2))), scipy_reference("laplace", host, axes=(0, 2)))
    gnd.laplace(x, output=x)
    assert_matches(cupy.asnumpy(x), want)


@pytest.mark.parametrize("name", ["sobel", "laplace", "gaussian_laplace", "correlate1d"])
def test_derivatives_of_smooth_float32_data_are_summed_in_double(name, rng):
    """Derivatives cancel: summed in float, their small results would carry
    the rounding of their large terms. float32 smoothing may sum in float,
    a pass with a negative weight may not (LinePass::may_cancel)."""
    host = (np.cumsum(rng.standard_normal((24, 40, 70)), axis=2) + 3000).astype(np.float32)
    args = {"gaussian_laplace": (1.0,), "correlate1d": ([-1.0, 2.0, -1.0],)}.get(name, ())
    check(name, cupy.asarray(host), *args)


DERIVATIVE_SUMS = ["gaussian_laplace", "gaussian_gradient_magnitude"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(37, 45, 70), (3, 2, 1), (20, 66, 129), (9, 33, 128)])
@pytest.mark.parametrize("name", DERIVATIVE_SUMS)
def test_derivative_sums_in_one_go(name, shape, dtype, rng):
    """gaussian_laplace and gaussian_gradient_magnitude of float volumes
    (fused_derivative_sum: the two first passes into temporaries, each
    chain's planes adding to the output, squares and root included) give
    the CPU's values to the bit: every pass summed in double and rounded,
    the sums rounded one operation at a time, as numpy's. Sigmas of 3 to 17
    taps on the planes, one mode or one an axis (chain k takes mode k along
    every axis, as scipy's; chains whose shared pass differs run one by
    one), a cval, a given output of the dtype."""
    x = cupy.asarray(random_array(rng, shape, dtype))
    host = cupy.asnumpy(x)
    cases = [(0.5, "reflect"), (1.0, "nearest"), ([1.5, 0.8, 2.0], "constant"),
             (1.0, ["wrap", "mirror", "mirror"]), (0.8, ["reflect", "nearest", "constant"])]
    for sigma, mode in cases:
        cval = float(rng.normal())
        got = getattr(gnd, name)(x, sigma, mode=mode, cval=cval)
        on_cpu = getattr(gnd, name)(host, sigma, mode=mode, cval=cval)
        np.testing.assert_array_equal(cupy.asnumpy(got), on_cpu, err_msg=f"{sigma} {mode}")
        assert_matches(cupy.asnumpy(got), scipy_reference(name, host, sigma, mode=mode, cval=cval))
        out = cupy.empty_like(x)
        assert getattr(gnd, name)(x, sigma, output=out, mode=mode, cval=cval) is out
        np.testing.assert_array_equal(cupy.asnumpy(out), on_cpu)
    np.testing.assert_array_equal(cupy.asnumpy(x), host, err_msg="the input was modified")


@pytest.mark.parametrize("name", DERIVATIVE_SUMS)
def test_derivative_sums_in_place_and_into_views(name, rng):
    """The output may be the input itself or a view of it: every read of the
    input is done (the two first passes) before the planes write. Outputs
    of another dtype, truncate and radius, and long passes take their own
    ways to the same values."""
    host = random_array(rng, (30, 40, 50), "float32")
    want = getattr(gnd, name)(host, 1.2)
    x = cupy.asarray(host)
    assert getattr(gnd, name)(x, 1.2, output=x) is x
    np.testing.assert_array_equal(cupy.asnumpy(x), want)
    big = cupy.asarray(random_array(rng, (30, 40, 60), "float32"))
    view = big[:, :, 5:55]
    view[...] = cupy.asarray(host)
    getattr(gnd, name)(view, 1.2, output=big[:, :, 2:52])
    np.testing.assert_array_equal(cupy.asnumpy(big[:, :, 2:52]), want)
    wide = cupy.asarray(random_array(rng, (30, 40, 64), "float32"))  # whole rows but the last group of each
    getattr(gnd, name)(cupy.asarray(host), 1.2, output=wide[:, :, :50])
    np.testing.assert_array_equal(cupy.asnumpy(wide[:, :, :50]), want)
    x = cupy.asarray(host)
    for kwargs in ({"output": cupy.float64}, {"truncate": 2.5}, {"radius": [2, 7, 4]}, {"sigma": 3.0}):
        kwargs = {"sigma": 1.2, **kwargs}
        sigma = kwargs.pop("sigma")
        got = getattr(gnd, name)(x, sigma, **kwargs)
        np.testing.assert_array_equal(cupy.asnumpy(got), getattr(gnd, name)(host, sigma, **kwargs), err_msg=str(kwargs))


def test_derivative_sums_taken_and_declined(rng):
    """The CUDA binding takes the derivative sums it has kernels for (3-D
    float32 and float64, passes of up to 17 taps along axes 1 and 2, chains
    1 and 2 sharing their first pass) and declines the others without
    writing: sigma 3, modes that differ along axes 1 and 2, 2-D arrays,
    float16."""
    from gpufilt import _dispatch

    cuda = _dispatch.cuda_module()
    stream = cupy.cuda.get_current_stream().ptr

    def chains(ndim, sigma, modes, order=2):
        return [gnd._gaussian_passes(ndim, sigma, tuple(order if a == k else 0 for a in range(ndim)), modes[k],
                                     4.0, None, None) for k in range(ndim)]

    x = cupy.asarray(random_array(rng, (10, 20, 30), "float32"))
    for sigma, modes, square, taken in [(1.0, ["reflect"] * 3, False, True), (2.0, ["nearest"] * 3, True, True),
                                        (3.0, ["reflect"] * 3, False, False),
                                        (1.0, ["reflect", "nearest", "wrap"], True, False),
                                        (1.0, ["wrap", "nearest", "nearest"], True, True)]:
        out = cupy.full_like(x, 7.0)
        assert cuda.derivative_sum(x, out, chains(3, sigma, modes, 1 if square else 2), 0.0, square, stream) is taken
        name = "gaussian_gradient_magnitude" if square else "gaussian_laplace"
        want = getattr(gnd, name)(cupy.asnumpy(x), sigma, mode=modes)
        np.testing.assert_array_equal(cupy.asnumpy(out), want if taken else np.full(x.shape, 7.0, np.float32))
    for y in (x[0], x.astype(cupy.float16)):
        out = cupy.full_like(y, 7.0)
        assert not cuda.derivative_sum(y, out, chains(y.ndim, 1.0, ["reflect"] * 3), 0.0, False, stream)
        assert bool((out == 7).all())
