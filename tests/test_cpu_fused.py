"""The CPU's one-sweep laplace (src/core/cpu_laplace.cpp,
CpuBackend::fused_laplace) on numpy arrays: 2-D and 3-D arrays, row by row,
each second difference rounded to the dtype and summed in it in axis order
as generic_laplace does. Checked against scipy (DESIGN.md's tolerances) and
bit for bit against the pass-by-pass sum.
"""
from __future__ import annotations

import numpy as np
import pytest

from gpufilt import ndimage as gnd

from _helpers import MODES, assert_matches, random_array, scipy_reference

LAYOUTS = ["C", "F", "strided", "transposed"]


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
