"""The tiled weighted-sum kernel (src/cuda/box_sum.cu) on cupy arrays:
correlate and convolve with weights filling a dense 3x3, 5x5, 7x7, 3x3x3,
5x5x5 or 7x7x7 box on the trailing axes. Each case is checked against scipy
and, bit for bit, against gpufilt's own CPU backend (both sum the taps in C
order in double, without FMA), except smoothings of float32 and float16 data
into float outputs (no negative weight), which the kernel sums in float:
those within DESIGN.md's tolerance of both.

Shapes are chosen around the kernel's tiles (4 rows x 64 columns for 3-D
boxes, one row of 256 for 2-D ones, runs of up to 32 planes taken 4 or 2 at
a time, twice that summed in float): partial tiles and steps, single rows
and planes, boxes larger than the array. Weights with a zero, or boxes elsewhere than the trailing axes,
go to the general kernel and must agree all the same.
"""
from __future__ import annotations

import numpy as np
import pytest

from gpufilt import ndimage as gnd

from _helpers import assert_matches, random_array, scipy_reference, weights_for

pytestmark = pytest.mark.cuda

cupy = pytest.importorskip("cupy")

MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float16", "float32",
          "float64"]
SHAPES_3D = [(37, 45, 70), (3, 2, 1), (70, 9, 130), (1, 20, 129), (41, 17, 65), (6, 5, 300)]
SHAPES_2D = [(300, 5), (5, 300), (129, 1030), (1, 1), (33, 1), (7, 257)]


def check(x, weights, name="correlate", exact=True, **kwargs):
    """gpufilt on cupy x against scipy and against gpufilt on the host:
    exactly, or (exact=False: the float sums) within float32's (float16's)
    tolerance."""
    host = cupy.asnumpy(x)
    got = getattr(gnd, name)(x, weights, **kwargs)
    assert isinstance(got, cupy.ndarray)
    got = cupy.asnumpy(got)
    on_host = getattr(gnd, name)(host, weights, **kwargs)
    if exact:
        np.testing.assert_array_equal(got, on_host)
    else:
        assert_matches(got, on_host)
    assert_matches(got, scipy_reference(name, host, weights, **kwargs))
    return got


def box_weights(rng, dtype, shape):
    return weights_for(rng, dtype, int(np.prod(shape))).reshape(shape)


def smoothing_weights(rng, shape):
    """Positive weights (none zero: a zero sends the box to the general kernel)."""
    return rng.random(shape) + 0.01


@pytest.mark.parametrize("side", [3, 5, 7])
@pytest.mark.parametrize("shape", SHAPES_3D)
def test_3d_box_matches_scipy(shape, side, rng):
    check(cupy.asarray(random_array(rng, shape, "float32")), box_weights(rng, "float32", (side,) * 3))


@pytest.mark.parametrize("side", [3, 5, 7])
@pytest.mark.parametrize("shape", SHAPES_2D)
def test_2d_box_matches_scipy(shape, side, rng):
    check(cupy.asarray(random_array(rng, shape, "float64")), box_weights(rng, "float64", (side, side)),
          mode="nearest")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("box", [(3, 3, 3), (5, 5), (1, 7, 7)])
def test_each_dtype_matches_scipy(box, dtype, rng):
    shape = (11, 20, 70)[-len(box):]
    x = cupy.asarray(random_array(rng, shape, dtype))
    check(x, box_weights(rng, dtype, box), mode="mirror")


@pytest.mark.parametrize("name", ["correlate", "convolve"])
@pytest.mark.parametrize("mode", MODES + ["grid-wrap", "grid-constant", "grid-mirror"])
@pytest.mark.parametrize("box", [(3, 3, 3), (5, 5, 5), (7, 7)])
def test_each_mode_matches_scipy(box, mode, name, rng):
    shape = (9, 13, 70)[-len(box):]
    x = cupy.asarray(random_array(rng, shape, "float32"))
    check(x, box_weights(rng, "float32", box), name=name, mode=mode, cval=1.5)


@pytest.mark.parametrize("origin", [-1, 1, (0, -1, 1), (1, 0, -1)])
@pytest.mark.parametrize("name", ["correlate", "convolve"])
def test_origin_matches_scipy(name, origin, rng):
    x = cupy.asarray(random_array(rng, (10, 19, 70), "float32"))
    check(x, box_weights(rng, "float32", (3, 3, 3)), name=name, origin=origin, mode="reflect")


@pytest.mark.parametrize("box", [(1, 3, 3, 3), (1, 1, 5, 5), (2, 1, 3, 3), (3, 3, 1, 3)])
def test_batched_and_declined_four_dimensional_boxes_match_scipy(box, rng):
    # (1, 3, 3, 3) and (1, 1, 5, 5) run batched over the leading axes; the
    # others span axes that are not trailing and go to the general kernel.
    x = cupy.asarray(random_array(rng, (3, 5, 9, 70), "float32"))
    check(x, box_weights(rng, "float32", box))


@pytest.mark.parametrize("view", ["fortran", "reversed", "strided", "transposed"])
def test_views_match_scipy(view, rng):
    base = cupy.asarray(random_array(rng, (24, 30, 140), "float32"))
    x = {
        "fortran": cupy.asfortranarray(base),
        "reversed": base[::-1, :, ::-1],
        "strided": base[::2, 1::3, ::2],
        "transposed": base.transpose(2, 0, 1),
    }[view]
    check(x, box_weights(rng, "float32", (5, 5, 5)), mode="nearest")


def test_weights_with_a_zero_match_scipy(rng):
    w = box_weights(rng, "float32", (5, 5, 5))
    w[2, 1, 3] = 0.0
    x = random_array(rng, (8, 20, 70), "float32")
    x[4, 7, 30] = np.inf  # a zero weight must not turn it into NaN
    got = cupy.asnumpy(gnd.correlate(cupy.asarray(x), w, mode="reflect"))
    np.testing.assert_array_equal(got, gnd.correlate(x, w, mode="reflect"))
    np.testing.assert_allclose(got, scipy_reference("correlate", x, w, mode="reflect"), rtol=1e-5, atol=1e-5)
    assert not np.isnan(got).any()


def test_output_dtype_and_view_output_are_written(rng):
    x = cupy.asarray(random_array(rng, (7, 40, 90), "uint8"))
    w = box_weights(rng, "uint8", (3, 3, 3))
    out = cupy.full((7, 40, 180), -1.0, cupy.float64)[:, :, ::2]
    got = gnd.correlate(x, w, output=out)
    assert got is out
    np.testing.assert_array_equal(cupy.asnumpy(out), gnd.correlate(cupy.asnumpy(x), w, output=np.float64))


def test_in_place_matches_scipy_on_a_copy(rng):
    x = cupy.asarray(random_array(rng, (12, 33, 80), "float32"))
    w = box_weights(rng, "float32", (3, 3, 3))
    expected = gnd.correlate(cupy.asnumpy(x), w)
    got = gnd.correlate(x, w, output=x)
    assert got is x
    np.testing.assert_array_equal(cupy.asnumpy(x), expected)


def test_complex_input_matches_scipy(rng):
    x = cupy.asarray(random_array(rng, (9, 20, 70), "complex64"))
    check(x, box_weights(rng, "float32", (3, 3, 3)), mode="wrap")


def test_large_volume_walks_many_planes(rng):
    x = cupy.asarray(random_array(rng, (130, 64, 300), "float32"))
    check(x, box_weights(rng, "float32", (5, 5, 5)), mode="reflect")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("box", [(3, 3, 3), (5, 5, 5), (7, 7, 7), (3, 3), (5, 5), (7, 7)])
def test_smoothing_sums_in_float_within_tolerance(box, dtype, rng):
    shape = (37, 45, 70)[-len(box):]
    check(cupy.asarray(random_array(rng, shape, dtype)), smoothing_weights(rng, box), exact=False, mode="reflect")


@pytest.mark.parametrize("name", ["correlate", "convolve"])
@pytest.mark.parametrize("mode", MODES + ["grid-wrap", "grid-constant", "grid-mirror"])
def test_smoothing_in_float_each_mode_and_origin(mode, name, rng):
    x = cupy.asarray(random_array(rng, (9, 13, 70), "float32"))
    check(x, smoothing_weights(rng, (5, 5, 5)), name=name, exact=False, mode=mode, cval=1.5, origin=(1, 0, -1))


@pytest.mark.parametrize("shape", [(3, 2, 1), (1, 20, 129), (130, 64, 300), (6, 5, 300)])
def test_smoothing_in_float_across_tiles_and_runs(shape, rng):
    check(cupy.asarray(random_array(rng, shape, "float32")), smoothing_weights(rng, (5, 5, 5)), exact=False)


def test_smoothing_of_data_far_from_zero_keeps_float32_tolerance(rng):
    # Each plane's 49 taps summed on their own, then the 7 plane sums: an
    # error within 56 float units of the sum, where one accumulator over all
    # 343 taps could reach 343.
    x = cupy.asarray((1000.0 + random_array(rng, (20, 30, 70), "float32")).astype(np.float32))
    check(x, smoothing_weights(rng, (7, 7, 7)), exact=False, mode="nearest")


@pytest.mark.parametrize("output", [np.float64, "negative weight", "uint16 input"])
def test_smoothing_sums_in_double_unless_float_data_into_a_float_output(output, rng):
    # A float64 output asks for double precision, a negative weight may
    # cancel, integers keep scipy's truncation: the double path, bit for bit.
    w = smoothing_weights(rng, (3, 3, 3))
    dtype, kwargs = "float32", {}
    if output is np.float64:
        kwargs["output"] = np.float64
    elif output == "negative weight":
        w[1, 1, 1] = -0.5
    else:
        dtype = "uint16"
        w /= w.sum()
    check(cupy.asarray(random_array(rng, (9, 20, 70), dtype)), w, **kwargs)
