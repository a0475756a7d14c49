"""The box rank kernels (src/cuda/box_rank.cu) on cupy arrays: the tiled
median over dense 3x3, 5x5, 7x7, 3x3x3 and 5x5x5 boxes on the trailing axes
(every dtype it orders exactly, every mode) and the sliding histogram for
any rank of any box on 8-bit data. Each case is checked against scipy and,
bit for bit, against gpufilt's own CPU backend.

Shapes are chosen around the kernel's tiles (8 rows x 64 columns for 3-D
boxes, one row of 512 columns for 2-D ones, runs of 4 to 32 planes, two
outputs a thread; 64 columns and runs of up to 256 for histograms): partial tiles, an odd last column, single rows and
planes, boxes larger than the array. Cases the kernel declines (int64,
a cval its keys cannot hold, boxes elsewhere than the trailing axes, other
ranks) must give the same results through the general kernels.
"""
from __future__ import annotations

import numpy as np
import pytest

from gpufilt import ndimage as gnd

from _helpers import random_array, scipy_reference

pytestmark = pytest.mark.cuda

cupy = pytest.importorskip("cupy")

MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "float16", "float32", "float64"]
SHAPES_3D = [(37, 45, 70), (3, 2, 1), (70, 9, 130), (1, 20, 129), (40, 17, 65), (6, 16, 128), (9, 8, 66)]
SHAPES_2D = [(300, 5), (5, 300), (129, 1030), (1, 1), (33, 1), (2, 513), (9, 1024), (4, 514)]


def check(x, *args, name="median_filter", **kwargs):
    """gpufilt on cupy x against scipy and, exactly, against gpufilt on the host."""
    host = cupy.asnumpy(x)
    got = getattr(gnd, name)(x, *args, **kwargs)
    assert isinstance(got, cupy.ndarray)
    got = cupy.asnumpy(got)
    np.testing.assert_array_equal(got, getattr(gnd, name)(host, *args, **kwargs))
    # Order statistics select one of the values: equal, not close.
    np.testing.assert_array_equal(got, scipy_reference(name, host, *args, **kwargs))
    return got


def sorted_window_reference(x, size, rank):
    """rank-th of each size^3 window of float x in reflect mode, sorted as
    numpy sorts (NaNs last): the CUDA kernels' NaN order. scipy's and the CPU
    networks' NaN orders are implementation-defined."""
    padded = np.pad(x, size // 2, mode="symmetric")
    windows = np.lib.stride_tricks.sliding_window_view(padded, (size,) * x.ndim)
    flat = windows.reshape(x.shape + (-1,))
    return np.sort(flat, axis=-1)[..., rank]


def device(rng, shape, dtype):
    return cupy.asarray(random_array(rng, shape, dtype))


@pytest.mark.parametrize("size", [3, 5])
@pytest.mark.parametrize("shape", SHAPES_3D)
def test_3d_box_matches_scipy(shape, size, rng):
    check(device(rng, shape, "float32"), size=size, mode="reflect")


@pytest.mark.parametrize("size", [3, 5, 7])
@pytest.mark.parametrize("shape", SHAPES_2D)
def test_2d_box_matches_scipy(shape, size, rng):
    check(device(rng, shape, "float32"), size=size, mode="nearest")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", [(3, 3, 3), (5, 5), (7, 7), (1, 3, 3)])
def test_each_dtype_matches_scipy(size, dtype, rng):
    shape = (11, 20, 70)[-len(size):]
    check(device(rng, shape, dtype), size=size, mode="mirror")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size", [(3, 3, 3), (5, 5, 5), (3, 3), (5, 5)])
def test_each_mode_matches_scipy(size, mode, rng):
    shape = (9, 13, 70)[-len(size):]
    check(device(rng, shape, "float64"), size=size, mode=mode, cval=1.5)


@pytest.mark.parametrize("mode", ["grid-wrap", "grid-constant", "grid-mirror"])
def test_grid_modes_match_scipy(mode, rng):
    check(device(rng, (6, 15, 67), "float32"), size=3, mode=mode, cval=-2.0)


@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint32", "float16", "float32"])
@pytest.mark.parametrize("cval", [0.0, 7.0, 0.5, 0.1, 1 + 2**-12])
def test_cval_matches_scipy(dtype, cval, rng):
    # 0.5 and 0.1 are not keys of the integer (or float) orders: those calls
    # go to the general kernel, and must agree all the same. 1 + 2**-12 is
    # a float32 but no float16: float16 data take the float32 keys for it.
    check(device(rng, (5, 7, 66), dtype), size=3, mode="constant", cval=cval)


@pytest.mark.parametrize("dtype,cval", [("int8", -3.0), ("int16", -3.0), ("float32", -3.0), ("float32", -1e10),
                                        ("float64", -1e300)])
def test_negative_cval_matches_scipy(dtype, cval, rng):
    check(device(rng, (5, 7, 66), dtype), size=3, mode="constant", cval=cval)


@pytest.mark.parametrize("origin", [-1, 1, (0, -1, 1), (1, 0, -1)])
def test_origin_matches_scipy(origin, rng):
    check(device(rng, (10, 19, 70), "float32"), size=3, origin=origin, mode="reflect")


@pytest.mark.parametrize("origin", [-2, 2, (1, -2)])
def test_origin_of_a_5x5_matches_scipy(origin, rng):
    check(device(rng, (40, 600), "int16"), size=5, origin=origin, mode="wrap")


@pytest.mark.parametrize("size", [(1, 3, 3, 3), (1, 1, 5, 5), (2, 1, 3, 3), (3, 3, 1, 3)])
def test_batched_and_declined_four_dimensional_boxes_match_scipy(size, rng):
    # (1, 3, 3, 3) and (1, 1, 5, 5) run batched over the leading axes; the
    # others span axes that are not trailing and go to the general kernel.
    check(device(rng, (3, 5, 9, 70), "float32"), size=size, mode="reflect")


@pytest.mark.parametrize("view", ["fortran", "reversed", "strided", "transposed"])
@pytest.mark.parametrize("size", [3, 5])
def test_views_match_scipy(view, size, rng):
    base = device(rng, (24, 30, 140), "float32")
    x = {
        "fortran": cupy.asfortranarray(base),
        "reversed": base[::-1, :, ::-1],
        "strided": base[::2, 1::3, ::2],
        "transposed": base.transpose(2, 0, 1),
    }[view]
    check(x, size=size, mode="nearest")


def test_output_dtype_and_view_output_are_written(rng):
    x = device(rng, (7, 40, 90), "uint8")
    out = cupy.full((7, 40, 180), -1.0, cupy.float64)[:, :, ::2]
    got = gnd.median_filter(x, size=3, output=out)
    assert got is out
    expected = scipy_reference("median_filter", cupy.asnumpy(x), size=3, output=np.float64)
    np.testing.assert_array_equal(cupy.asnumpy(out), expected)


@pytest.mark.parametrize("view", ["offset", "reversed", "strided"])
@pytest.mark.parametrize("size", [(3, 3, 3), (5, 5, 5), (3, 3)])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "float16", "float32"])
def test_output_views_of_the_input_dtype_are_written(dtype, size, view, rng):
    # These dtypes store an output pair in one store where the output's
    # layout allows it: an offset of one element (pairs misaligned), a
    # reversed or a strided last axis must each get the element stores.
    x = device(rng, (6, 20, 70)[-len(size):], dtype)
    wide = cupy.zeros(x.shape[:-1] + (141,), dtype)
    out = {"offset": wide[..., 1:71], "reversed": wide[..., 70::-1][..., :70], "strided": wide[..., ::2][..., :70]}[view]
    got = gnd.median_filter(x, size=size, mode="reflect", output=out)
    assert got is out
    np.testing.assert_array_equal(cupy.asnumpy(out), scipy_reference("median_filter", cupy.asnumpy(x), size=size))


@pytest.mark.parametrize("fraction", [0.05, 0.5, 0.9])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_nan_ranks_after_every_number(dtype, fraction, rng):
    # A NaN has no rank: the median is taken among the other values, and is
    # NaN past their count (at 50% and 90% NaN, many outputs are).
    host = random_array(rng, (9, 20, 70), dtype)
    host[rng.random(host.shape) < fraction] = np.nan
    got = cupy.asnumpy(gnd.median_filter(cupy.asarray(host), size=3, mode="reflect"))
    np.testing.assert_array_equal(got, sorted_window_reference(host, 3, 13))
    if fraction == 0.5:  # about half the windows hold 14 or more NaNs
        assert np.isnan(got).any() and not np.isnan(got).all()


NAN_BITS = {  # quiet and signalling NaNs with either sign, and payloads up to all ones
    "float16": (np.uint16, [0xFE00, 0xFC01, 0xFFFF, 0x7C01, 0x7FFF, 0x7E00]),
    "float32": (np.uint32, [0xFFC00000, 0xFF800001, 0xFFFFFFFF, 0x7F800001, 0x7FFFFFFF, 0x7FC00000]),
    "float64": (np.uint64, [0xFFF8000000000000, 0xFFF0000000000001, 0xFFFFFFFFFFFFFFFF, 0x7FF0000000000001]),
}


@pytest.mark.parametrize("ndim", [2, 3])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_nans_of_either_sign_and_any_payload_rank_after_infinity(dtype, ndim, rng):
    # The kernels order floats by their bits (order keys): a NaN whose sign
    # bit is set, or whose payload is any other, must rank after +inf as the
    # quiet NaN does, and -inf before every number.
    uint, bits = NAN_BITS[dtype]
    nans = np.array(bits, uint).view(dtype)
    host = rng.choice(np.array([-np.inf, np.inf, -1.0, -0.0, 0.0, 2.5], dtype), (9, 20, 70)[-ndim:])
    where = rng.random(host.shape) < 0.4
    host[where] = rng.choice(nans, int(where.sum()))
    got = cupy.asnumpy(gnd.median_filter(cupy.asarray(host), size=3, mode="reflect"))
    np.testing.assert_array_equal(got, sorted_window_reference(host, 3, 3**ndim // 2))
    assert np.isnan(got).any() and np.isinf(got).any()


def test_signed_zeros_infinities_and_extremes_match_scipy(rng):
    values = np.array([-np.inf, np.inf, -0.0, 0.0, np.finfo(np.float32).max, -np.finfo(np.float32).max,
                       np.finfo(np.float32).tiny, 1.0], np.float32)
    host = rng.choice(values, (8, 20, 66)).astype(np.float32)
    check(cupy.asarray(host), size=3, mode="nearest")


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint32"])
def test_integer_extremes_match_scipy(dtype, rng):
    info = np.iinfo(dtype)
    host = rng.choice(np.array([info.min, info.max, 0, 1, info.max - 1], dtype), (30, 70))
    check(cupy.asarray(host), size=(5, 5), mode="reflect")


@pytest.mark.parametrize("name,args", [("rank_filter", (4,)), ("rank_filter", (-1,)),
                                       ("percentile_filter", (50,)), ("percentile_filter", (30,))])
def test_other_ranks_of_a_box_match_scipy(name, args, rng):
    # Rank 13 of 27 (percentile 50) runs here; the others in the general kernel.
    check(device(rng, (8, 21, 66), "float32"), *args, name=name, size=3, mode="reflect")


def test_int64_goes_to_the_general_kernel_and_matches_scipy(rng):
    check(device(rng, (8, 21, 66), "int64"), size=3, mode="reflect")


def test_in_place_matches_scipy_on_a_copy(rng):
    x = device(rng, (12, 33, 80), "float32")
    expected = scipy_reference("median_filter", cupy.asnumpy(x), size=3)
    got = gnd.median_filter(x, size=3, output=x)
    assert got is x
    np.testing.assert_array_equal(cupy.asnumpy(x), expected)


def test_runs_on_a_non_default_stream(rng):
    x = device(rng, (20, 40, 130), "float32")
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        got = gnd.median_filter(x, size=3)
    stream.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(got), scipy_reference("median_filter", cupy.asnumpy(x), size=3))


def test_large_volume_walks_many_planes(rng):
    # Enough tiles that each block walks the longest run of planes (32).
    check(device(rng, (130, 64, 300), "float32"), size=3, mode="reflect")


# ------------------------------------------------------------ histogram form

EIGHT_BIT = ["uint8", "int8", "bool"]


@pytest.mark.parametrize("dtype", EIGHT_BIT)
@pytest.mark.parametrize("size", [(15, 15), (9, 9), (4, 6), (1, 11), (3, 5, 7), (2, 2, 2)])
def test_histogram_median_matches_scipy(size, dtype, rng):
    shape = (13, 150, 70)[-len(size):]
    check(device(rng, shape, dtype), size=size, mode="reflect")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(300, 70), (5, 129), (1, 1), (40, 3), (600, 65)])
def test_histogram_each_mode_and_shape_matches_scipy(shape, mode, rng):
    check(device(rng, shape, "uint8"), size=(11, 9), mode=mode, cval=200)


@pytest.mark.parametrize("name,args", [("rank_filter", (0,)), ("rank_filter", (17,)), ("rank_filter", (-1,)),
                                       ("percentile_filter", (90,)), ("minimum_filter", ()),
                                       ("maximum_filter", ())])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_histogram_any_rank_matches_scipy(name, args, dtype, rng):
    check(device(rng, (60, 90), dtype), *args, name=name, size=(7, 9), mode="mirror")


@pytest.mark.parametrize("cval", [0.0, 255.0, 17.0, 2.5])
def test_histogram_cval_matches_scipy(cval, rng):
    # 2.5 is not a bin of uint8: the general kernel takes it.
    check(device(rng, (30, 80), "uint8"), size=9, mode="constant", cval=cval)


@pytest.mark.parametrize("view", ["fortran", "reversed", "strided"])
def test_histogram_views_match_scipy(view, rng):
    base = device(rng, (90, 300), "uint8")
    x = {"fortran": cupy.asfortranarray(base), "reversed": base[::-1, ::-1], "strided": base[1::2, ::3]}[view]
    check(x, size=(9, 13), origin=(1, -3), mode="wrap")


def test_histogram_batched_4d_and_output_dtype(rng):
    x = device(rng, (2, 3, 40, 70), "uint8")
    got = check(x, size=(1, 1, 9, 9), output=np.float32, mode="nearest")
    assert got.dtype == np.float32


def test_histogram_walks_long_runs(rng):
    check(device(rng, (1100, 130), "uint8"), size=15, mode="reflect")
