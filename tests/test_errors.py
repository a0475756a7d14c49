"""Bad inputs: each raises the documented exception, with a message naming
what was wrong, and leaves the caller's arrays exactly as they were."""
from __future__ import annotations

import contextlib
import ctypes
import subprocess
import sys

import numpy as np
import pytest
from scipy import ndimage as snd

import gpufilt
from gpufilt import ndimage as gnd

from _helpers import CUDA_USABLE, random_array

FUNCTIONS = ["correlate1d", "convolve1d", "gaussian_filter1d", "gaussian_filter",
             "uniform_filter1d", "uniform_filter"]
# One ordinary positional argument per filter.
ARG = {"correlate1d": [0.25, 0.5, 0.25], "convolve1d": [1.0, -2.0, 0.5],
       "gaussian_filter1d": 1.0, "gaussian_filter": 1.0, "uniform_filter1d": 3,
       "uniform_filter": 3}


@contextlib.contextmanager
def untouched(*arrays):
    """Asserts that the arrays hold the same bytes after the block as before."""
    before = [np.array(a, copy=True) for a in arrays]
    yield
    for a, b in zip(arrays, before):
        np.testing.assert_array_equal(np.asarray(a), b, err_msg="a failing call modified an array")


def call(name, x, *args, **kwargs):
    return getattr(gnd, name)(x, *args, **kwargs)


@pytest.fixture
def x(rng):
    return random_array(rng, (5, 6), np.float64)


@pytest.fixture
def out(rng):
    return random_array(rng, (5, 6), np.float64)


# ------------------------------------------------------------------- dtypes

BAD_DTYPES = {
    "object": np.array([[1.0, 2.0], [3.0, 4.0]], dtype=object),
    "unicode": np.array([["a", "b"], ["c", "d"]]),
    "bytes": np.array([[b"a", b"b"], [b"c", b"d"]]),
    "datetime64": np.array([[1, 2], [3, 4]], dtype="datetime64[s]"),
    "timedelta64": np.array([[1, 2], [3, 4]], dtype="timedelta64[s]"),
    "void": np.zeros((2, 2), dtype="V8"),
    "structured": np.zeros((2, 2), dtype=[("a", "<f4"), ("b", "<i4")]),
    "longdouble": np.ones((2, 2), dtype=np.longdouble),
}
if np.dtype(np.longdouble).itemsize == 8:  # longdouble is float64 on some platforms
    del BAD_DTYPES["longdouble"]


@pytest.mark.parametrize("kind", list(BAD_DTYPES))
@pytest.mark.parametrize("name", FUNCTIONS)
def test_unsupported_input_dtype_raises_type_error(name, kind):
    bad = BAD_DTYPES[kind]
    with untouched(bad), pytest.raises(TypeError, match="dtype"):
        call(name, bad, ARG[name])


@pytest.mark.parametrize("kind", [k for k in BAD_DTYPES if k not in ("datetime64", "timedelta64")])
def test_unsupported_output_array_dtype_raises_type_error(kind, rng):
    x = random_array(rng, (2, 2), np.float64)
    bad = BAD_DTYPES[kind].copy()
    with untouched(x, bad), pytest.raises(TypeError, match="dtype"):
        gnd.uniform_filter(x, 3, output=bad)


@pytest.mark.parametrize("dtype", ["datetime64[s]", "timedelta64[s]"])
def test_unsupported_output_array_dtype_is_named_in_fresh_interpreter(dtype):
    code = ("import numpy as np, gpufilt.ndimage as g\n"
            "try:\n"
            f"    g.uniform_filter(np.zeros((2, 2)), 3, output=np.zeros((2, 2), '{dtype}'))\n"
            "except TypeError as e:\n"
            "    print(e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "unsupported dtype" in run.stdout and dtype.split("[")[0] in run.stdout, run.stdout


@pytest.mark.parametrize("dtype", [object, "U3", "S3", "datetime64[s]", "V8", np.longdouble])
def test_unsupported_output_dtype_raises_type_error(dtype, x):
    if np.dtype(dtype) == np.float64:
        pytest.skip("longdouble is float64 here")
    with untouched(x), pytest.raises(TypeError, match="dtype"):
        gnd.gaussian_filter(x, 1.0, output=dtype)


@pytest.mark.parametrize("dtype", [">f4", ">f8", ">i2", ">u4", ">c16"])
@pytest.mark.parametrize("role", ["input", "output", "both"])
def test_non_native_byte_order_is_filtered_as_scipy_does(role, dtype, rng):
    native = random_array(rng, (4, 5), np.dtype(dtype).newbyteorder("="))
    swapped = native.astype(dtype)
    x = swapped if role in ("input", "both") else native
    out, expected_out = (None, None) if role == "input" else (np.zeros_like(swapped), np.zeros_like(swapped))
    with untouched(x):
        result = gnd.uniform_filter(x, 3, output=out, mode="nearest")
    expected = snd.uniform_filter(x, 3, output=expected_out, mode="nearest")
    if out is not None:
        assert result is out and out.dtype == np.dtype(dtype)
    np.testing.assert_allclose(result, expected, rtol=1e-6)


def test_complex_output_for_real_input_raises_value_error(x):
    out = np.ones(x.shape, np.complex128)
    with untouched(x, out), pytest.raises(ValueError, match="complex"):
        gnd.uniform_filter(x, 3, output=out)


def test_real_output_array_for_complex_input_raises_value_error(rng):
    z = random_array(rng, (4, 5), np.complex128)
    out = np.ones(z.shape)
    with untouched(z, out), pytest.raises(ValueError, match="complex"):
        gnd.gaussian_filter(z, 1.0, output=out)


@pytest.mark.parametrize("bad", [object(), None, "abc", [[1, 2], [3]], [{}]])
def test_non_array_input_raises_type_error(bad):
    with pytest.raises(TypeError, match="dtype|not an array"):
        gnd.gaussian_filter(bad, 1.0)


def test_too_many_dimensions_raise_value_error():
    x = np.ones((1,) * 33)
    with pytest.raises(ValueError, match="dimensions"):
        gpufilt.describe(x)
    with untouched(x), pytest.raises(ValueError, match="dimensions"):
        gnd.gaussian_filter(x, 1.0, output=x)


# ------------------------------------------------------------------- output


@pytest.mark.parametrize("shape", [(5, 5), (6, 5), (30,), (5, 6, 1), ()])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_output_of_wrong_shape_raises_value_error(name, shape, x, rng):
    out = random_array(rng, shape, np.float64)
    with untouched(x, out), pytest.raises(ValueError, match="shape"):
        call(name, x, ARG[name], output=out)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_read_only_numpy_output_raises_value_error(name, x, out):
    out.flags.writeable = False
    with untouched(x, out), pytest.raises(ValueError, match="read-only"):
        call(name, x, ARG[name], output=out)


def test_broadcast_output_raises_value_error(x):
    out = np.broadcast_to(np.ones(6), x.shape)
    with untouched(x, out), pytest.raises(ValueError, match="read-only"):
        gnd.uniform_filter(x, 3, output=out)


def test_read_only_buffer_output_raises_value_error(rng):
    x = random_array(rng, (16,), np.uint8)
    out = bytes(16)
    with untouched(x), pytest.raises(ValueError, match="read-only"):
        gnd.uniform_filter1d(x, 3, output=out)
    with pytest.raises(ValueError, match="read-only"):
        gnd.uniform_filter1d(x, 3, output=memoryview(out))
    assert out == bytes(16)


@pytest.mark.parametrize("bad", [[0.0] * 30, 5, object()])
def test_output_that_is_neither_array_nor_dtype_raises_type_error(bad, x):
    with untouched(x), pytest.raises(TypeError):
        gnd.uniform_filter(x, 3, output=bad)


# ---------------------------------------------------- CUDA Array Interface


class FakeCAI:
    """A producer exporting only __cuda_array_interface__, with a made-up pointer."""

    def __init__(self, cai):
        self._cai = cai

    @property
    def __cuda_array_interface__(self):
        return self._cai


def cai(**overrides):
    d = {"shape": (3, 4), "typestr": "<f4", "data": (0x7F00DEAD0000, False), "version": 3}
    d.update(overrides)
    return d


def without(key):
    d = cai()
    del d[key]
    return d


MALFORMED_CAI = {
    "not-a-dict": ([("shape", (3, 4))], TypeError),
    "no-shape": (without("shape"), ValueError),
    "no-typestr": (without("typestr"), ValueError),
    "no-data": (without("data"), ValueError),
    "no-version": (without("version"), ValueError),
    "version-1": (cai(version=1), ValueError),
    "version-4": (cai(version=4), ValueError),
    "version-str": (cai(version="3"), TypeError),
    "shape-list": (cai(shape=[3, 4]), TypeError),
    "shape-float": (cai(shape=(3.0, 4)), TypeError),
    "shape-negative": (cai(shape=(-1, 4)), ValueError),
    "shape-overflow": (cai(shape=(2 ** 62, 2 ** 62)), ValueError),
    "shape-huge-int": (cai(shape=(2 ** 70, 1)), ValueError),
    "shape-bool": (cai(shape=(True, 4)), TypeError),
    "too-many-dims": (cai(shape=(1,) * 33), ValueError),
    "typestr-int": (cai(typestr=4), TypeError),
    "typestr-object": (cai(typestr="|O8"), TypeError),
    "typestr-big-endian": (cai(typestr=">f4"), TypeError),
    "typestr-garbage": (cai(typestr="xyz"), TypeError),
    "strides-length": (cai(strides=(4,)), ValueError),
    "strides-not-multiple": (cai(strides=(16, 2)), ValueError),
    "strides-list": (cai(strides=[16, 4]), TypeError),
    "data-not-tuple": (cai(data=0x7F00DEAD0000), TypeError),
    "data-one-item": (cai(data=(0x7F00DEAD0000,)), ValueError),
    "data-null-nonempty": (cai(data=(0, False)), ValueError),
    "data-pointer-str": (cai(data=("0x1000", False)), TypeError),
    "mask": (cai(mask=(0x7F00DEAD0000, False)), ValueError),
    "stream-zero": (cai(stream=0), ValueError),
    "stream-str": (cai(stream="s"), TypeError),
}


@pytest.mark.parametrize("case", list(MALFORMED_CAI))
def test_malformed_cuda_array_interface_is_refused(case):
    bad, error = MALFORMED_CAI[case]
    with pytest.raises(error):
        gpufilt.describe(FakeCAI(bad))


# Cases the filters' own look at the interface (shape and dtype) already refuses.
@pytest.mark.parametrize("case", ["not-a-dict", "no-shape", "no-typestr", "typestr-int"])
def test_malformed_cuda_array_interface_input_to_a_filter_is_refused(case):
    bad, error = MALFORMED_CAI[case]
    with pytest.raises(error):
        gnd.gaussian_filter(FakeCAI(bad), 1.0)


@pytest.mark.skipif(CUDA_USABLE, reason="a CUDA device is usable here")
@pytest.mark.parametrize("output", ["numpy-array", None, np.float32])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_cuda_input_without_usable_device_raises_value_error(name, output):
    out = np.ones((3, 4), np.float32) if output == "numpy-array" else output
    with pytest.raises(ValueError, match="without CUDA|no CUDA device"):
        call(name, FakeCAI(cai()), ARG[name], output=out)
    if output == "numpy-array":
        np.testing.assert_array_equal(out, 1)


@pytest.mark.skipif(CUDA_USABLE, reason="a CUDA device is usable here")
def test_cuda_input_without_usable_device_raises_value_error_whatever_the_message():
    with pytest.raises(ValueError):
        gnd.gaussian_filter(FakeCAI(cai()), 1.0)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_cpu_input_with_cuda_output_raises_value_error(name, rng):
    x = random_array(rng, (3, 4), np.float32)
    with untouched(x), pytest.raises(ValueError, match="device"):
        call(name, x, ARG[name], output=FakeCAI(cai()))


def test_read_only_cuda_output_raises_value_error(rng):
    x = random_array(rng, (3, 4), np.float32)
    with untouched(x), pytest.raises(ValueError):
        gnd.uniform_filter(x, 3, output=FakeCAI(cai(data=(0x7F00DEAD0000, True))))


# ---------------------------------------------------------------- capsules


def _capsule(name: bytes):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(0x1000, name, None)


@pytest.mark.parametrize("name", [b"foo", b"dltensor_x", b"DLTENSOR"])
def test_capsule_with_wrong_name_raises_type_error(name):
    with pytest.raises(TypeError, match="capsule"):
        gpufilt.describe(_capsule(name))


def test_capsule_without_name_raises_type_error():
    with pytest.raises(TypeError, match="capsule"):
        gpufilt.describe(_capsule(None))


def test_used_capsule_raises_value_error():
    with pytest.raises(ValueError, match="already"):
        gpufilt.describe(_capsule(b"used_dltensor"))


# --------------------------------------------------------------- arguments


@pytest.mark.parametrize("mode", ["foo", "Reflect", "", None, 3, "constant "])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_invalid_mode_raises_value_error(name, mode, x):
    with untouched(x), pytest.raises(ValueError, match="mode"):
        call(name, x, ARG[name], mode=mode, output=x)


@pytest.mark.parametrize("name", ["gaussian_filter", "uniform_filter"])
def test_invalid_mode_in_per_axis_sequence_raises_value_error(name, x):
    with untouched(x), pytest.raises(ValueError, match="mode"):
        call(name, x, ARG[name], mode=["reflect", "bogus"], output=x)


@pytest.mark.parametrize("sigma", [-1.0, -1e-3, float("nan"), (1.0, -2.0)])
def test_negative_sigma_raises_value_error_for_gaussian_filter(sigma, x):
    with untouched(x), pytest.raises(ValueError, match="sigma"):
        gnd.gaussian_filter(x, sigma, output=x)


@pytest.mark.parametrize("sigma", [-1.0, float("nan")])
def test_negative_sigma_raises_value_error_for_gaussian_filter1d(sigma, x):
    with untouched(x), pytest.raises(ValueError, match="sigma"):
        gnd.gaussian_filter1d(x, sigma, output=x)


@pytest.mark.parametrize("order", [-1, (0, -1)])
def test_negative_order_raises_value_error(order, x):
    with untouched(x), pytest.raises(ValueError, match="order"):
        gnd.gaussian_filter(x, 1.0, order=order, output=x)
    if np.ndim(order) == 0:
        with pytest.raises(ValueError, match="order"):
            gnd.gaussian_filter1d(x, 1.0, order=order, output=x)


@pytest.mark.parametrize("radius", [-1, (2, -3)])
def test_negative_radius_raises_value_error(radius, x):
    with untouched(x), pytest.raises(ValueError, match="radius"):
        gnd.gaussian_filter(x, 1.0, radius=radius, output=x)


@pytest.mark.parametrize("size", [0, -2, (3, 0), (-1, 3)])
def test_zero_or_negative_size_leaves_the_axis_as_scipy_does_for_uniform_filter(size, x):
    np.testing.assert_array_equal(gnd.uniform_filter(x, size), snd.uniform_filter(x, size))


@pytest.mark.parametrize("size", [2.5, "3", None, (3, 1.5)])
def test_non_integer_size_raises_type_error_for_uniform_filter(size, x):
    with untouched(x), pytest.raises(TypeError, match="size"):
        gnd.uniform_filter(x, size, output=x)


@pytest.mark.parametrize("size", [0, -3])
def test_zero_or_negative_size_raises_value_error_for_uniform_filter1d(size, x):
    with untouched(x), pytest.raises(ValueError, match="size"):
        gnd.uniform_filter1d(x, size, output=x)


@pytest.mark.parametrize("axis", [2, -3, 10])
@pytest.mark.parametrize("name", ["correlate1d", "convolve1d", "gaussian_filter1d",
                                  "uniform_filter1d"])
def test_axis_out_of_range_raises_value_error(name, axis, x):
    with untouched(x), pytest.raises(ValueError, match="axis"):
        call(name, x, ARG[name], axis=axis, output=x)


@pytest.mark.parametrize("name", ["correlate1d", "convolve1d", "gaussian_filter1d",
                                  "uniform_filter1d"])
def test_one_dimensional_filter_of_zero_dimensional_input_raises_value_error(name):
    x = np.array(1.5)
    with untouched(x), pytest.raises(ValueError, match="axis"):
        call(name, x, ARG[name])


@pytest.mark.parametrize("axes", [(2,), (0, -3), (5, 0), [-4]])
@pytest.mark.parametrize("name", ["gaussian_filter", "uniform_filter"])
def test_axes_out_of_range_raise_value_error(name, axes, x):
    with untouched(x), pytest.raises(ValueError, match="axis|axes"):
        call(name, x, ARG[name], axes=axes, output=x)


@pytest.mark.parametrize("axes", [(0, 0), (1, -1), (0, 1, 0)])
@pytest.mark.parametrize("name", ["gaussian_filter", "uniform_filter"])
def test_repeated_axes_raise_value_error(name, axes, x):
    with untouched(x), pytest.raises(ValueError, match="axes"):
        call(name, x, ARG[name], axes=axes, output=x)


@pytest.mark.parametrize("size,origin", [(3, 2), (3, -2), (4, 2), (4, -3), (1, 1), (1, -1), (5, 3)])
def test_invalid_origin_raises_value_error_for_uniform_filter1d(size, origin, x):
    with untouched(x), pytest.raises(ValueError, match="origin"):
        gnd.uniform_filter1d(x, size, origin=origin, output=x)


# uniform_filter skips axes of size 1 without looking at their origin, as scipy does.
@pytest.mark.parametrize("size,origin", [(3, 2), (3, -2), (4, 2), (4, -3), (5, 3)])
def test_invalid_origin_raises_value_error_for_uniform_filter(size, origin, x):
    with untouched(x), pytest.raises(ValueError, match="origin"):
        gnd.uniform_filter(x, size, origin=origin, output=x)
    with pytest.raises(ValueError, match="origin"):
        gnd.uniform_filter(x, (3, size), origin=(0, origin), output=x)


@pytest.mark.parametrize("taps,origin", [(3, 2), (3, -2), (4, 2), (4, -3), (1, 1), (1, -1)])
@pytest.mark.parametrize("name", ["correlate1d", "convolve1d"])
def test_invalid_origin_raises_value_error_for_weights(name, taps, origin, x):
    with untouched(x), pytest.raises(ValueError, match="origin"):
        call(name, x, np.ones(taps) / taps, origin=origin, output=x)


@pytest.mark.parametrize("origin", [1.0, 5.0, -7.0, np.float32(2.0), (0, 1.0), (0, 9.0), float("nan")])
@pytest.mark.parametrize("name, window", [
    ("uniform_filter1d", dict(size=3)), ("uniform_filter", dict(size=3)), ("minimum_filter", dict(size=3)),
    ("median_filter", dict(size=3)), ("correlate1d", dict(weights=[1.0, 2.0, 3.0])),
    ("correlate", dict(weights=np.ones((3, 3)))), ("grey_erosion", dict(size=3)),
    ("grey_dilation", dict(structure=np.ones((3, 3)))),
])
def test_float_origins_raise_what_scipy_raises(name, window, origin, x):
    # scipy checks the range first: a float beyond it is a ValueError, one within a TypeError.
    if name.endswith("1d") and isinstance(origin, tuple):
        return
    with pytest.raises((TypeError, ValueError)) as expected:
        getattr(snd, name)(x.copy(), origin=origin, **window)
    expected = expected.value
    with untouched(x), pytest.raises(type(expected), match="origin"):
        getattr(gnd, name)(x, origin=origin, output=x, **window)


@pytest.mark.parametrize("weights", [[], np.empty(0), np.ones((2, 2))])
@pytest.mark.parametrize("name", ["correlate1d", "convolve1d"])
def test_empty_or_multidimensional_weights_raise_value_error(name, weights, x):
    with untouched(x), pytest.raises(ValueError, match="weights"):
        call(name, x, weights, output=x)


@pytest.mark.parametrize("cval", [1j, 2.0 + 0.5j, np.complex64(1 + 1j)])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_complex_cval_with_real_input_raises_value_error(name, cval, x):
    with untouched(x), pytest.raises(ValueError, match="cval"):
        call(name, x, ARG[name], mode="constant", cval=cval, output=x)


@pytest.mark.parametrize("keyword,value", [
    ("sigma", (1.0, 2.0, 3.0)),
    ("sigma", (1.0,)),
    ("order", (0, 1, 0)),
    ("mode", ["reflect"]),
    ("mode", ("reflect", "wrap", "constant")),
    ("radius", (1, 2, 3)),
])
def test_sequence_of_wrong_length_raises_value_error_for_gaussian_filter(keyword, value, x):
    kwargs = {"sigma": 1.0, keyword: value}
    with untouched(x), pytest.raises(ValueError, match=keyword):
        gnd.gaussian_filter(x, output=x, **kwargs)


@pytest.mark.parametrize("keyword,value", [
    ("size", (3, 3, 3)),
    ("size", [3]),
    ("origin", (0, 1, 0)),
    ("mode", ["reflect", "wrap", "nearest"]),
])
def test_sequence_of_wrong_length_raises_value_error_for_uniform_filter(keyword, value, x):
    kwargs = {"size": 3, keyword: value}
    with untouched(x), pytest.raises(ValueError, match=keyword):
        gnd.uniform_filter(x, output=x, **kwargs)


def test_sequence_length_follows_axes(x):
    with untouched(x), pytest.raises(ValueError, match="sigma"):
        gnd.gaussian_filter(x, (1.0, 2.0), axes=(1,), output=x)
    with pytest.raises(ValueError, match="size"):
        gnd.uniform_filter(x, (3, 3), axes=[0], output=x)


@pytest.mark.parametrize("stream", [-1, "0", 1.5, True, object()])
def test_malformed_stream_raises_type_error_even_on_cpu(stream, x, out):
    with untouched(x, out), pytest.raises(TypeError, match="stream"):
        gnd.gaussian_filter(x, 1.0, output=out, stream=stream)
