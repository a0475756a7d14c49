"""The CPU's one-sweep paths (src/core/cpu_backend.cpp, cpu_laplace.cpp) on
numpy arrays.

Separable chains on float32/float64 volumes of at least 32768 elements run
plane by plane (CpuBackend::fused_chain): the passes along the two inner
axes on planes held in cache, the one along the outermost axis over a ring
of planes. laplace of 2-D and 3-D arrays runs row by row in one sweep
(CpuBackend::fused_laplace). Both must give what the pass-by-pass kernels
give, to the bit: each case is checked against scipy (DESIGN.md's
tolerances) and exactly against the same filter written in place
(`output=` the input itself), which the one-sweep paths decline.

Shapes are above the fusing threshold, with lines shorter than the filters,
single planes and odd sizes; layouts C, Fortran, strided with negative
strides and transposed (the march axis is the one of the largest stride).

2-D arrays run row by row in one sweep (CpuBackend::fused_chain, StripWorker
for a pass across the rows with at most one along them, rows too long for
the cache in strips of columns). Chains on 8- and 16-bit integers run in
both sweeps too, correlations only: their results must be scipy's exactly
(8-bit data is summed in float where that provably gives scipy's double
sum truncated, else in double).
"""
from __future__ import annotations

import numpy as np
import pytest

from gpufilt import ndimage as gnd

from _helpers import MODES, assert_matches, random_array, scipy_reference

# Every copy of the CPU kernels (baseline, AVX2, AVX-512: conftest.cpu_isa).
pytestmark = pytest.mark.usefixtures("cpu_isa")

SHAPES_3D = [(34, 33, 31), (3, 130, 129), (130, 129, 2), (200, 5, 40), (1, 200, 190)]
LAYOUTS = ["C", "F", "strided", "transposed"]

# name, positional arguments, keyword arguments
CHAINS = [
    ("uniform_filter", (3,), {}),
    ("uniform_filter", ((9, 4, 5),), {"origin": (1, -1, 0)}),
    ("gaussian_filter", (1.0,), {}),
    ("gaussian_filter", ((1.0, 0.0, 2.0),), {"order": (0, 1, 0)}),
    ("sobel", (0,), {}),
    ("sobel", (1,), {}),
    ("sobel", (2,), {}),
    ("prewitt", (-1,), {}),
    ("maximum_filter", (3,), {}),
    ("minimum_filter", ((2, 3, 4),), {}),
    ("uniform_filter", (5,), {"axes": (1, 2)}),
    ("correlate1d", ([1.0, 3.0, -2.0, 5.0], 0), {"origin": 1}),
]


def laid_out(x, layout):
    """x (a copy) in another memory layout, same values."""
    if layout == "F":
        return np.asfortranarray(x)
    if layout == "strided":  # every other element along axis 1, axis 0 reversed
        big = np.zeros((x.shape[0], 2 * x.shape[1], x.shape[2]), x.dtype)
        big[::-1, ::2] = x
        return big[::-1, ::2]
    if layout == "transposed":  # axis 2 outermost in memory
        return np.ascontiguousarray(x.transpose(2, 0, 1)).transpose(1, 2, 0)
    return x.copy()


def check_chain(name, x, *args, **kwargs):
    """gpufilt against scipy, and bit for bit against the pass-by-pass path."""
    host = x.copy()
    got = getattr(gnd, name)(x, *args, **kwargs)
    assert_matches(got, scipy_reference(name, host, *args, **kwargs))
    in_place = x.copy()
    getattr(gnd, name)(in_place, *args, output=in_place, **kwargs)
    np.testing.assert_array_equal(got, in_place)
    np.testing.assert_array_equal(x, host, err_msg="the input was modified")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES_3D)
@pytest.mark.parametrize("name,args,kwargs", CHAINS)
def test_chain_plane_by_plane(name, args, kwargs, shape, dtype, layout, rng):
    x = laid_out(random_array(rng, shape, dtype), layout)
    check_chain(name, x, *args, **kwargs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,args,kwargs", CHAINS)
def test_chain_plane_by_plane_modes(name, args, kwargs, mode, rng):
    x = random_array(rng, (35, 36, 37), "float32")
    check_chain(name, x, *args, mode=mode, cval=1.1, **kwargs)


# Long passes along the rows of a volume's planes (the fused chain: over
# kFusedMinSize elements): the outputs near both ends of each row are
# computed together from the two ends' windows side by side (row_ends).
# Origins put the ends' reach off centre, down to no outputs at one end.
ROW_END_PASSES = [
    ("gaussian_filter1d", (4.0, -1), {}),
    ("correlate1d", (np.linspace(-1.0, 2.0, 12), -1), {"origin": 3}),
    ("correlate1d", (np.linspace(0.5, 1.5, 7), -1), {"origin": -3}),  # nothing left of the left end
    ("correlate1d", (np.linspace(-1.0, 1.0, 9), -1), {"origin": 4}),  # nothing right of the right end
]


# float64 and 8-bit data sum in double in scipy's order: scipy's bits.
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,args,kwargs", ROW_END_PASSES)
@pytest.mark.parametrize("dtype", ["float64", "uint8"])
def test_row_ends_of_long_passes_give_scipys_bits(name, args, kwargs, dtype, mode, rng):
    x = random_array(rng, (8, 10, 450), dtype)
    np.testing.assert_array_equal(getattr(gnd, name)(x, *args, mode=mode, cval=2.0, **kwargs),
                                  scipy_reference(name, x, *args, mode=mode, cval=2.0, **kwargs))


# float32 sums in float: the pass-by-pass path's bits, scipy's within tolerance.
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,args,kwargs", ROW_END_PASSES)
def test_row_ends_of_long_float32_passes(name, args, kwargs, mode, rng):
    check_chain(name, random_array(rng, (8, 10, 450), "float32"), *args, mode=mode, cval=2.0, **kwargs)


@pytest.mark.parametrize("name", ["sobel", "gaussian_filter"])
def test_chain_per_axis_modes_and_cval(name, rng):
    """cval 1.1 is no float32: float32 derivatives summed in double use it
    in double, as the pass-by-pass kernels do."""
    x = random_array(rng, (33, 34, 35), "float32")
    args = (1,) if name == "sobel" else (1.5,)
    check_chain(name, x, *args, mode=["constant", "wrap", "constant"], cval=1.1)


@pytest.mark.parametrize("mode", ["reflect", "constant", "wrap"])
@pytest.mark.parametrize("size,origin", [(4, 1), (5, -2), (9, 0), (17, 3)])
@pytest.mark.parametrize("shape", [(9, 60, 70), (61, 30, 30)])
def test_uniform_across_planes_in_groups(shape, size, origin, mode, rng):
    """float32 window means across planes are computed for four output
    planes at once, then two and one at a run's end (plane counts that leave
    such ends, runs split between threads)."""
    x = random_array(rng, shape, "float32")
    check_chain("uniform_filter", x, size, mode=mode, cval=1.1, origin=origin)


def test_chain_output_forms(rng):
    """An output array of other strides is written in place; another dtype,
    an overlapping output and 4-D arrays go pass by pass."""
    host = random_array(rng, (40, 30, 35), "float32")
    want = scipy_reference("uniform_filter", host, 5)
    out = np.empty((40, 30, 70), np.float32)[:, :, ::2]
    assert gnd.uniform_filter(host, 5, output=out) is out
    assert_matches(out, want)
    assert_matches(gnd.uniform_filter(host, 5, output=np.float64),
                   scipy_reference("uniform_filter", host, 5, output=np.float64))
    x4 = random_array(rng, (6, 20, 20, 20), "float64")
    assert_matches(gnd.sobel(x4, 1), scipy_reference("sobel", x4, 1))
    shifted = np.zeros((41, 30, 35), np.float32)
    shifted[1:] = host
    gnd.uniform_filter(shifted[1:], 5, output=shifted[:-1])
    assert_matches(shifted[:-1], want)


def test_chain_of_smooth_float32_data_sums_derivatives_in_double(rng):
    """A derivative of large smooth data cancels to small results: summed
    in double plane by plane as pass by pass (LinePass::may_cancel)."""
    x = (np.cumsum(rng.standard_normal((34, 40, 70)), axis=2) + 3000).astype(np.float32)
    check_chain("sobel", x, 2)
    check_chain("gaussian_filter", x, 1.0, order=(0, 0, 1))


# ------------------------------------------------------------------ 2-D and integer chains

SHAPES_2D = [(300, 257), (64, 600), (600, 64), (150, 1000), (17, 2000)]
DTYPES_2D = ["float32", "float64", "uint8", "int8", "uint16", "int16"]
CHAINS_2D = [
    ("gaussian_filter", (2.0,), {}),
    ("gaussian_filter", ((1.0, 3.0),), {"order": (1, 0)}),
    ("gaussian_filter1d", (1.5, 0), {}),
    ("gaussian_filter1d", (1.5, 1), {}),
    ("uniform_filter", ((5, 4),), {"origin": (1, -1)}),
    ("sobel", (0,), {}),
    ("sobel", (1,), {}),
    ("maximum_filter", ((3, 4),), {}),
    ("correlate1d", ([1.0, 3.0, -2.0, 5.0], 0), {"origin": 1}),
    ("correlate1d", ([0.5, -1.0, 0.25], 1), {}),
]


def check_chain_exact(name, x, *args, **kwargs):
    """check_chain, and integer results equal to scipy's exactly."""
    check_chain(name, x, *args, **kwargs)
    if x.dtype.kind in "iu":
        np.testing.assert_array_equal(getattr(gnd, name)(x, *args, **kwargs),
                                      scipy_reference(name, x, *args, **kwargs))


def laid_out_2d(x, layout):
    """A 2-D x (a copy) in another memory layout, same values."""
    return laid_out(x[:, :, None], layout)[:, :, 0] if layout != "transposed" else np.ascontiguousarray(x.T).T


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES_2D)
@pytest.mark.parametrize("shape", SHAPES_2D)
@pytest.mark.parametrize("name,args,kwargs", CHAINS_2D)
def test_chain_row_by_row(name, args, kwargs, shape, dtype, layout, rng):
    x = laid_out_2d(random_array(rng, shape, dtype), layout)
    check_chain_exact(name, x, *args, **kwargs)


@pytest.mark.parametrize("cval", [1.1, -7.0, 300.5])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float32", "uint8", "int16"])
@pytest.mark.parametrize("name,args,kwargs", [CHAINS_2D[0], CHAINS_2D[1], CHAINS_2D[8]])
def test_chain_row_by_row_modes(name, args, kwargs, dtype, mode, cval, rng):
    """cval of no integer dtype (nor float32) and beyond uint8 is summed in
    double at full precision, as pass by pass."""
    x = random_array(rng, (70, 90), dtype)
    check_chain_exact(name, x, *args, mode=mode, cval=cval, **kwargs)


@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8", "int16"])
@pytest.mark.parametrize("shape", [(20, 16000), (40, 9000)])
def test_chain_in_strips(shape, dtype, rng):
    """Rows too long for the cache run in strips of columns; the pass along
    the rows reads past a strip's ends (per its mode at the array's ends)."""
    x = random_array(rng, shape, dtype)
    for mode in ["reflect", "wrap", "constant"]:
        check_chain_exact("gaussian_filter", x, 2.0, mode=mode, cval=3.5)
    check_chain_exact("gaussian_filter", x.T, 2.0)
    check_chain_exact("correlate1d", x, [1.0, -2.0, 4.0], 1, mode="wrap")


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("sigma", [0.7, 1.0, 2.0, 3.3, 8.0, 40.0])
def test_8bit_sums_in_float_are_scipys(sigma, dtype, rng):
    """Flat regions and ramps put scipy's sums on and near integers, where
    the float sums are redone in double; long kernels (sigma 40: 321 taps)
    sum in double throughout."""
    x = random_array(rng, (200, 300), dtype)
    x[20:120, 30:200] = 77
    x[130:, :] = np.arange(300, dtype=np.int64) % 100
    check_chain_exact("gaussian_filter", x, sigma)
    check_chain_exact("gaussian_filter", x, sigma, order=(0, 2))


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
def test_integer_chains_wrap_as_scipy(dtype, rng):
    """Results beyond the dtype wrap as scipy's casts do; sums that may leave
    [-2**30, 2**30) go pass by pass (beyond int32, scipy's casts and
    gpufilt's differ, as pass by pass)."""
    x = random_array(rng, (120, 130), dtype)
    info = np.iinfo(dtype)
    scale = 1.5e9 / 5 / max(info.max, -int(info.min))  # sums up to 1.5e9
    for weights in ([3.0, -1.5, 2.0], [100.0, -50.0, 7.3], [3 * scale, 2 * scale]):
        for axis in (0, 1):
            check_chain_exact("correlate1d", x, weights, axis)
    check_chain_exact("correlate", x, np.outer([1.0, 2.0, 1.0], [-1.0, 0.0, 3.0]))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
@pytest.mark.parametrize("shape", SHAPES_3D)
@pytest.mark.parametrize("name,args,kwargs", [CHAINS[2], CHAINS[3], CHAINS[4], CHAINS[11]])
def test_integer_chain_plane_by_plane(name, args, kwargs, shape, dtype, layout, rng):
    x = laid_out(random_array(rng, shape, dtype), layout)
    check_chain_exact(name, x, *args, **kwargs)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("shape", [(34, 33, 31), (40, 3, 300), (60, 30, 20)])
def test_8bit_chains_with_a_long_pass_across_planes(shape, dtype, layout, rng):
    """A first pass across the planes of more taps than fuse (sigma 3: 25)
    runs alone, the passes after it fused in place
    (CpuBackend::fused_after_march_pass): scipy's bits, into a new array and
    into the input itself."""
    x = laid_out(random_array(rng, shape, dtype), layout)
    check_chain_exact("gaussian_filter", x, 3.0)
    check_chain_exact("gaussian_filter", x, (5.0, 0.7, 2.0), mode="constant", cval=300.0)
    check_chain_exact("gaussian_filter", x, 4.0, order=(0, 1, 0), mode="wrap")
    check_chain_exact("correlate1d", x, np.linspace(-1.0, 2.0, 31), 0)  # one pass: not split


# ------------------------------------------------------------------ laplace

LAPLACE_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                  "float16", "float32", "float64"]
LAPLACE_SHAPES = [(37, 45, 70), (3, 2, 1), (70, 9, 3), (1, 20, 130), (300, 5), (5, 300), (129, 257),
                  (1, 1), (33, 1)]


def laplace_data(rng, shape, dtype):
    x = random_array(rng, shape, dtype)
    if dtype == "int32":  # 4 * |x| within int32: beyond it scipy's C cast and gpufilt's differ
        x //= 8
    return x


def check_laplace(x, **kwargs):
    """The one-sweep laplace against scipy, and bit for bit against the
    pass-by-pass sum (axes given: generic_laplace's way)."""
    host = x.copy()
    got = gnd.laplace(x, **kwargs)
    if x.dtype != np.float16:  # scipy in float32 sums float32 second differences
        assert_matches(got, scipy_reference("laplace", host, **kwargs))
    np.testing.assert_array_equal(got, gnd.laplace(x, axes=tuple(range(x.ndim)), **kwargs))
    np.testing.assert_array_equal(x, host, err_msg="the input was modified")


@pytest.mark.parametrize("dtype", LAPLACE_DTYPES)
@pytest.mark.parametrize("shape", LAPLACE_SHAPES)
def test_laplace_in_one_sweep(shape, dtype, rng):
    modes = [str(m) for m in rng.choice(["reflect", "constant", "nearest", "mirror", "wrap"], len(shape))]
    check_laplace(laplace_data(rng, shape, dtype), mode=modes, cval=float(rng.integers(-3, 4)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["uint8", "float32", "float64"])
def test_laplace_modes(mode, dtype, rng):
    check_laplace(laplace_data(rng, (20, 21, 22), dtype), mode=mode, cval=2.5)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ["int16", "float32", "float64"])
def test_laplace_layouts(layout, dtype, rng):
    check_laplace(laid_out(laplace_data(rng, (30, 40, 50), dtype), layout))
    check_laplace(laid_out(laplace_data(rng, (30, 40, 1), dtype), layout)[:, :, 0])


def test_laplace_output_forms(rng):
    """An output array of the input's dtype is written in one sweep; another
    dtype, the input itself and an axes subset go the pass-by-pass way."""
    host = random_array(rng, (20, 30, 40), "float32")
    want = scipy_reference("laplace", host)
    out = np.empty((20, 30, 80), np.float32)[:, :, ::2]
    assert gnd.laplace(host, output=out) is out
    assert_matches(out, want)
    assert_matches(gnd.laplace(host, output=np.float64), scipy_reference("laplace", host, output=np.float64))
    assert_matches(gnd.laplace(host, axes=(0, 2)), scipy_reference("laplace", host, axes=(0, 2)))
    x = host.copy()
    gnd.laplace(x, output=x)
    assert_matches(x, want)
    empty = np.zeros((0, 5, 4), np.float32)
    assert gnd.laplace(empty).shape == (0, 5, 4)


# Sums in double (float64 data; float32 derivatives) take scipy's order and
# rounding to the last bit, in every copy of the kernels (conftest.cpu_isa):
# a fused multiply-add, which the AVX-512 copies could emit, would show here.
@pytest.mark.parametrize("name,args,dtype", [
    ("gaussian_filter", (1.0,), "float64"),
    ("correlate1d", ([0.3, -1.1, 0.7, 2.9], -1), "float64"),
    ("uniform_filter1d", (5, 0), "float64"),
    ("prewitt", (-1,), "float64"),
    ("sobel", (0,), "float32"),
    ("laplace", (), "float32"),
])
@pytest.mark.parametrize("shape", [(40, 37, 33), (130, 129), (300,)])
def test_sums_in_double_give_scipys_bits(name, args, dtype, shape, rng):
    x = random_array(rng, shape, dtype)
    np.testing.assert_array_equal(getattr(gnd, name)(x, *args), scipy_reference(name, x, *args))


# ---- Long box windows (src/core/cpu_extremes.hpp) ------------------------------
# Minima and maxima from 2 taps across rows beyond the cache (strip chain,
# march pass, lanes of a line pass) and from 16 on rows and lines held in
# cache run van Herk / Gil-Werman or doubling instead of comparing every
# tap; float means of 24 to 32 taps sum by doubling. Sizes around the block
# and routing boundaries, windows longer than the axis, every mode, origins
# to both ends, layouts, threads.

def extended_indices(n, left, size, mode):
    """Input index each window tap of a line of n reads (-1: cval), as
    core/border.hpp maps it: shape (n, size)."""
    i = np.arange(n)[:, None] - left + np.arange(size)[None, :]
    inside = (i >= 0) & (i < n)
    if mode in ("constant", "grid-constant"):
        return np.where(inside, i, -1)
    if mode == "nearest":
        return np.clip(i, 0, n - 1)
    if mode in ("wrap", "grid-wrap"):
        return i % n
    if mode in ("reflect", "grid-mirror"):
        r = i % (2 * n)
        return np.where(r < n, r, 2 * n - 1 - r)
    if n == 1:  # mirror
        return np.zeros_like(i)
    r = i % (2 * n - 2)
    return np.where(r < n, r, 2 * n - 2 - r)


def tap_by_tap_extreme(x, size, axis, mode, cval, origin, minimum):
    """scipy's rule tap by tap (a running value replaced only by a strictly
    smaller or larger one), with numpy's selections: NaN heads, signed zeros
    and NaN payloads to the bit, as the CPU's tap-by-tap kernel gives them."""
    x = np.moveaxis(np.asarray(x), axis, -1)
    n = x.shape[-1]
    taps = extended_indices(n, size // 2 + origin, size, mode)
    cv = np.asarray(cval).astype(x.dtype)
    acc = None
    for k in range(size):
        col = taps[:, k]
        v = np.where(col >= 0, x[..., np.maximum(col, 0)], cv)
        acc = v if acc is None else np.where(v < acc if minimum else v > acc, v, acc)
    return np.moveaxis(acc, -1, axis)


def ties_and_nans(rng, shape, dtype):
    """Few distinct values (ties), signed zeros, infinities and NaNs with payloads."""
    x = rng.integers(-3, 4, size=shape).astype(dtype)
    u = rng.random(shape)
    x[u < 0.1] = -0.0
    x[(u >= 0.1) & (u < 0.2)] = 0.0
    x[(u >= 0.2) & (u < 0.23)] = np.inf
    nan = (u >= 0.23) & (u < 0.27)
    bits = x.view(np.uint16 if x.itemsize == 2 else np.uint32 if x.itemsize == 4 else np.uint64)
    payload = {2: 0x7E01, 4: 0x7FC00123, 8: 0x7FF8000000000123}[x.itemsize]
    bits[nan] = payload
    return x


def same_bits(a, b):
    """Equal to the bit; float16 NaNs in any payload (its conversions to and
    from float canonicalise them, tap by tap too)."""
    a, b = np.array(a), np.array(b)
    if a.dtype == np.float16:
        a[np.isnan(a)] = b[np.isnan(b)] = np.nan
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


BOX_SIZES = [2, 3, 15, 16, 17, 24, 31, 64, 65]
BOX_SHAPES = [(300, 200), (200, 3000), (40, 50, 60), (30, 6, 400)]


@pytest.mark.parametrize("kind", ["minimum", "maximum"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("shape", BOX_SHAPES)
def test_box_extremes_follow_the_tap_by_tap_rule(kind, dtype, shape, rng):
    x = ties_and_nans(rng, shape, dtype)
    fn = getattr(gnd, f"{kind}_filter1d")
    for axis in range(len(shape)):
        for size in BOX_SIZES:
            for origin in {0, -(size // 2), (size - 1) // 2}:
                left = size // 2 + origin
                if max(left, size - 1 - left) > 2 * shape[axis]:
                    continue  # a reach that separable.cpp's bound_window shortens (one period of every mode)
                want = tap_by_tap_extreme(x, size, axis, "reflect", 0.0, origin, kind == "minimum")
                got = fn(x, size, axis=axis, origin=origin)
                assert same_bits(got, want), (axis, size, origin)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cval", [1.5, np.nan, -np.inf, -0.0])
@pytest.mark.parametrize("kind", ["minimum", "maximum"])
def test_box_extremes_modes_and_cvals(mode, cval, kind, rng):
    x = ties_and_nans(rng, (37, 41, 43), "float32")
    fn = getattr(gnd, f"{kind}_filter1d")
    for axis in range(3):
        for size in (2, 16, 31, 90):  # 90: longer than every axis
            want = tap_by_tap_extreme(x, size, axis, mode, cval, 0, kind == "minimum")
            assert same_bits(fn(x, size, axis=axis, mode=mode, cval=cval), want), (axis, size)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["minimum_filter", "maximum_filter"])
def test_box_extremes_layouts_and_threads(name, threads, layout, rng):
    x = laid_out(ties_and_nans(rng, (34, 60, 70), "float64"), layout)
    for size in [(2, 17, 16), (31, 3, 40), (65, 64, 2)]:
        want = x
        for axis, n in enumerate(size):
            want = tap_by_tap_extreme(want, n, axis, "mirror", 0.0, 0, name == "minimum_filter")
        assert same_bits(getattr(gnd, name)(x, size, mode="mirror", threads=threads), want), size
    x2 = ties_and_nans(rng, (500, 300), "float32")[::-2, ::-1]  # negative strides
    want = tap_by_tap_extreme(tap_by_tap_extreme(x2, 20, 0, "wrap", 0.0, 3, True), 33, 1, "wrap", 0.0, -5, True)
    got = gnd.minimum_filter(x2, (20, 33), mode="wrap", origin=(3, -5), threads=threads)
    assert same_bits(got, want)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint16", "int32"])
@pytest.mark.parametrize("kind", ["minimum", "maximum"])
def test_box_extremes_of_integers_are_scipys(kind, dtype, rng):
    x = random_array(rng, (70, 530), dtype)
    name = f"{kind}_filter1d"
    for axis in (0, 1):
        for size in (2, 15, 16, 33, 64, 151):
            for mode in ("reflect", "constant", "wrap"):
                np.testing.assert_array_equal(getattr(gnd, name)(x, size, axis=axis, mode=mode, cval=7),
                                              scipy_reference(name, x, size, axis=axis, mode=mode, cval=7))
    xf = np.asfortranarray(x)[::-1]
    np.testing.assert_array_equal(gnd.maximum_filter(xf, (31, 2), threads=2),
                                  scipy_reference("maximum_filter", xf, (31, 2)))


# Each copy of the kernels (baseline, AVX2, AVX-512) on one case of each path.
@pytest.mark.usefixtures("cpu_isa")
def test_box_extremes_every_copy(rng):
    x = ties_and_nans(rng, (40, 70, 50), "float32")
    for axis in range(3):
        for size in (3, 24):
            want = tap_by_tap_extreme(x, size, axis, "reflect", 0.0, 0, False)
            assert same_bits(gnd.maximum_filter1d(x, size, axis=axis), want)
    u = random_array(rng, (300, 230), "uint8")
    np.testing.assert_array_equal(gnd.minimum_filter(u, 21), scipy_reference("minimum_filter", u, 21))


# Means of 24 to 32 taps in float sum by doubling on every path: scipy's
# within tolerance, and the same bits fused or pass by pass (check_chain),
# in any layout and with any threads.
@pytest.mark.parametrize("size", [23, 24, 25, 31, 32, (24, 31, 2)])
@pytest.mark.parametrize("mode", MODES)
def test_long_float_means(size, mode, rng):
    x = random_array(rng, (36, 50, 70), "float32")
    check_chain("uniform_filter", x, size, mode=mode, cval=np.float32(1.25))
    results = [gnd.uniform_filter(laid_out(x, layout), size, mode=mode, cval=1.25, threads=t)
               for layout in LAYOUTS for t in (1, 2)]
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("shape", [(300, 200), (150, 2100), (20, 31, 2000)])
def test_long_float_means_along_each_axis(shape, axis, rng):
    if axis == 1 and len(shape) == 2:
        axis = 0
    x = random_array(rng, shape, "float32")
    for size in (24, 29, 32, 40):  # 40: in double
        got = gnd.uniform_filter1d(x, size, axis=axis)
        assert_matches(got, scipy_reference("uniform_filter1d", x, size, axis=axis))
        in_place = x.copy()
        gnd.uniform_filter1d(in_place, size, axis=axis, output=in_place)
        np.testing.assert_array_equal(got, in_place)
        np.testing.assert_array_equal(got, gnd.uniform_filter1d(np.asfortranarray(x), size, axis=axis))
    h = x.astype(np.float16)
    assert_matches(gnd.uniform_filter1d(h, 27, axis=axis), scipy_reference("uniform_filter1d", h, 27, axis=axis))
