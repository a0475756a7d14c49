"""Data and tolerance helpers shared by the test modules (imported as
``_helpers``; pytest puts this folder on sys.path).

scipy.ndimage is the oracle everywhere; the tolerances are DESIGN.md's:
integer outputs within one unit, float32 (and complex64) within 1e-5
relative, float64 (and complex128) within 1e-12 relative, each with an
absolute floor scaled by the magnitude of the data. float16, which scipy
refuses, is compared with scipy run on float32 and rounded to float16, within
a few float16 ulps.
"""
from __future__ import annotations

import numpy as np

from gpufilt import _dispatch

# gpufilt.info() would import torch/jax/cupy to report their versions: ask
# the extension module directly instead.
CUDA_BUILT = _dispatch._cuda is not None
CUDA_USABLE = CUDA_BUILT and not _dispatch._cuda.unusable_reason()

INT_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
COMPLEX_DTYPES = ["complex64", "complex128"]
ALL_DTYPES = INT_DTYPES + FLOAT_DTYPES + COMPLEX_DTYPES
MODES = ["reflect", "constant", "nearest", "mirror", "wrap",
         "grid-constant", "grid-mirror", "grid-wrap"]


def int_range(dtype):
    """[lo, hi] random integers are drawn from: the whole range for narrow
    types; 64-bit types are kept within 2**40 so that a double holds every
    value and every sum exactly enough for the one-unit tolerance."""
    info = np.iinfo(dtype)
    if info.bits < 64:
        return int(info.min), int(info.max)
    return (0 if info.min == 0 else -(2 ** 40)), 2 ** 40


def random_array(rng, shape, dtype):
    """Random data of `dtype` (never all zeros): the whole range for narrow
    integers, standard normal for floats, both parts for complex."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        lo, hi = int_range(dtype)
        return rng.integers(lo, hi, size=shape, endpoint=True, dtype=dtype)
    if dtype.kind == "f":
        return (rng.standard_normal(shape) * 4).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    raise AssertionError(f"no random data for {dtype}")


# -------------------------------------------------------------- tolerances

RTOL = {"f": {2: 4e-3, 4: 1e-5, 8: 1e-12}, "c": {8: 1e-5, 16: 1e-12}}


def assert_matches(actual, expected, dtype=None, scale=None, err_msg=""):
    """`actual` equals the oracle's `expected` within DESIGN.md's tolerance
    for `dtype` (default: expected's dtype).

    Integers and bool: within one unit. Floats and complex: within the
    relative tolerance of their precision, with an absolute floor of that
    tolerance times `scale` (default max(1, max|expected|)), so values that
    cancel to nearly zero are judged against the magnitude of the data.
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    dtype = np.dtype(dtype if dtype is not None else expected.dtype)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape} {err_msg}"
    if actual.size == 0:
        return
    if dtype.kind in "biu":
        a = actual.astype(np.float64)
        e = expected.astype(np.float64)
        diff = np.abs(a - e)
        worst = np.unravel_index(np.argmax(diff), diff.shape)
        assert diff.max() <= 1, (f"integer result differs by {diff.max()} units at {worst}: "
                                 f"got {actual[worst]}, expected {expected[worst]} {err_msg}")
        return
    rtol = RTOL[dtype.kind][dtype.itemsize]
    if scale is None:
        scale = float(np.max(np.abs(expected.astype(np.complex128))))
    atol = rtol * max(1.0, scale)
    np.testing.assert_allclose(actual.astype(np.complex128 if dtype.kind == "c" else np.float64),
                               expected.astype(np.complex128 if dtype.kind == "c" else np.float64),
                               rtol=rtol, atol=atol, err_msg=err_msg)


def as_scipy_input(x):
    """What scipy gets in place of `x`: float16 (which scipy refuses) as float32."""
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype == np.float16 else x.copy()


# ------------------------------------------------------------------ oracle


def scipy_reference(name, x, *args, output=None, **kwargs):
    """scipy.ndimage.<name> on a copy of numpy array `x`, with float16 (which
    scipy refuses, as input or output) computed in float32 and rounded."""
    from scipy import ndimage

    x = np.asarray(x)
    half = output is None and x.dtype == np.float16
    if output is not None:
        output = np.dtype(output)
        if output == np.float16:
            output, half = np.dtype(np.float32), True
    expected = getattr(ndimage, name)(as_scipy_input(x), *args, output=output, **kwargs)
    if not half:
        return expected
    with np.errstate(over="ignore"):  # float16 overflows to inf, as gpufilt's result does
        return expected.astype(np.float16)


def int_weights(rng, taps):
    """Non-negative weights summing to one: integer results stay in range, so
    scipy's C casts are defined and comparable."""
    w = rng.random(taps) + 0.05
    return w / w.sum()


def weights_for(rng, dtype, taps):
    """Filter weights for data of `dtype`: signed weights for float and
    complex data, a convex combination for integers (no overflow, no
    negative values into unsigned outputs)."""
    if np.dtype(dtype).kind in "biu":
        return int_weights(rng, taps)
    return rng.standard_normal(taps)


ORDER_FILTERS = ("minimum_filter", "maximum_filter", "minimum_filter1d", "maximum_filter1d")


def check_on_cuda(name, x, *args, exact=True, **kwargs):
    """gpufilt.ndimage.<name> on cupy array x against scipy, and against
    gpufilt on the host: bit for bit when `exact` and the data is summed in
    double on the GPU (float32 and float16 sums in float are within
    tolerance; uniform filters sum directly on the GPU, with scipy's running
    sum on the CPU: pass exact=False). x must be left as it was."""
    import cupy
    from gpufilt import ndimage as gnd

    host = cupy.asnumpy(x)
    summed_in_float = x.dtype in (np.float16, np.float32) and name not in ORDER_FILTERS
    got = cupy.asnumpy(getattr(gnd, name)(x, *args, **kwargs))
    assert_matches(got, scipy_reference(name, host, *args, **kwargs))
    on_cpu = getattr(gnd, name)(host, *args, **kwargs)
    if exact and not summed_in_float:
        np.testing.assert_array_equal(got, on_cpu)
    else:
        assert_matches(got, on_cpu)
    np.testing.assert_array_equal(cupy.asnumpy(x), host, err_msg="the input was modified")
