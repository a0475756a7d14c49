"""scipy.ndimage's behaviours beyond its values, which code written for scipy
or cupyx relies on: exception types, array-likes, byte order, bool outputs,
rank filters' integer cval, complex gradient magnitudes, device parameters,
stream= everywhere, and a clear word for functions gpufilt lacks. The whole
of SciPy's own filter test file runs in test_scipy_suite.py."""
from __future__ import annotations

import array
import inspect

import numpy as np
import pytest
from scipy import ndimage as snd

import gpufilt
from gpufilt import ndimage as gnd

from _helpers import CUDA_USABLE, random_array
from test_errors import untouched


@pytest.fixture
def x(rng):
    return random_array(rng, (6, 7), np.float64)


# ------------------------------------------------------------ exception types

def test_argument_error_is_both_value_error_and_runtime_error():
    assert issubclass(gpufilt.ArgumentError, ValueError)
    assert issubclass(gpufilt.ArgumentError, RuntimeError)


# Calls scipy answers with RuntimeError; gpufilt raises ArgumentError (both types).
SCIPY_RUNTIME_ERRORS = [
    ("gaussian_filter", ((1.0, 2.0, 3.0),), {"axes": (0, 1)}),
    ("uniform_filter", (), {"size": (3,)}),
    ("minimum_filter", (), {"size": 3, "origin": (0, 0, 0)}),
    ("median_filter", (), {"size": 3, "mode": ["reflect", "nearest"]}),
    ("rank_filter", (2,), {"footprint": np.array([[1, 0], [1, 1]]), "mode": ["reflect"] * 2}),
    ("correlate", (np.ones((2, 2)),), {"mode": ["nearest", "reflect"]}),
    ("correlate", (np.ones((2, 2, 2)),), {}),
    ("maximum_filter", (), {"footprint": np.array([[[1, 0], [1, 1]]])}),
    ("maximum_filter", (), {"footprint": np.ones((3, 3, 3))}),
    ("gaussian_filter", (1.0,), {"mode": "bogus"}),
    ("uniform_filter1d", (0,), {}),
    ("gaussian_laplace", (1.0,), {"mode": ["reflect", "bogus"]}),
    ("correlate1d", ([1.0, 1j],), {"output": np.zeros((6, 7))}),
    ("convolve", (np.array([[1, 1j]]),), {"output": np.zeros((6, 7))}),
    ("uniform_filter", (3,), {"output": np.zeros((6, 8))}),
]


@pytest.mark.parametrize("name, args, kwargs", SCIPY_RUNTIME_ERRORS,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(SCIPY_RUNTIME_ERRORS)])
def test_what_scipy_refuses_with_runtime_error_raises_runtime_error(name, args, kwargs, x):
    with pytest.raises(RuntimeError):
        getattr(snd, name)(x, *args, **kwargs)
    arrays = [x] + [v for v in kwargs.values() if isinstance(v, np.ndarray)]
    with untouched(*arrays), pytest.raises(gpufilt.ArgumentError):
        getattr(gnd, name)(x, *args, **kwargs)


@pytest.mark.parametrize("axes, error, words", [((0, 2), ValueError, "out of range"),
                                                ((-3,), ValueError, "out of range"),
                                                ((0.0, 1), TypeError, "cannot be interpreted as an integer")])
def test_axes_errors_are_scipys(axes, error, words, x):
    for module in (snd, gnd):
        with pytest.raises(error, match=words):
            module.uniform_filter(x, 3, axes=axes)


def test_missing_scipy_function_names_itself():
    with pytest.raises(AttributeError, match="does not provide scipy.ndimage.binary_hit_or_miss"):
        gnd.binary_hit_or_miss  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'no_such_filter'"):
        gnd.no_such_filter  # noqa: B018


# ---------------------------------------------------------------- array-likes

class WithArray:
    """An object with __array__ and no buffer (as pandas objects are)."""

    def __init__(self, values):
        self._values = np.asarray(values)

    def __array__(self, dtype=None, copy=None):
        return self._values if dtype is None else self._values.astype(dtype)


ARRAY_LIKES = {
    "list": lambda a: a.tolist(),
    "tuple": lambda a: tuple(map(tuple, a.tolist())),
    "__array__": WithArray,
    "big-endian": lambda a: a.astype(a.dtype.newbyteorder(">")),
}


@pytest.mark.parametrize("kind", ARRAY_LIKES)
@pytest.mark.parametrize("name, args", [("gaussian_filter", (1.2,)), ("median_filter", (3,)),
                                        ("correlate", (np.array([[1.0, -2.0], [0.5, 3.0]]),)),
                                        ("sobel", ()), ("uniform_filter1d", (4,))])
def test_array_likes_are_filtered_as_scipy_filters_them(kind, name, args, rng):
    values = rng.integers(-50, 50, (5, 6)).astype(np.float64)
    made = ARRAY_LIKES[kind](values)
    np.testing.assert_allclose(getattr(gnd, name)(made, *args), getattr(snd, name)(made, *args), rtol=1e-12)


def test_scipy_doc_examples_with_lists():
    assert gnd.correlate1d([2, 8, 0, 4, 1, 9, 9, 0], weights=[1, 3]).tolist() == [8, 26, 8, 12, 7, 28, 36, 9]
    assert gnd.convolve1d([2, 8, 0, 4, 1, 9, 9, 0], weights=[1, 3]).tolist() == [14, 24, 4, 13, 12, 36, 27, 0]
    np.testing.assert_array_equal(gnd.uniform_filter1d([2, 8, 0, 4, 1, 9, 9, 0], size=3),
                                  snd.uniform_filter1d([2, 8, 0, 4, 1, 9, 9, 0], size=3))
    np.testing.assert_array_equal(gnd.median_filter(7, 3), snd.median_filter(7, 3))
    np.testing.assert_array_equal(gnd.maximum_filter(array.array("d", [1, 5, 2, 0]), 2),
                                  snd.maximum_filter(np.array([1.0, 5, 2, 0]), 2))


# ------------------------------------------------------------ bool outputs

BOOL_CASES = [("gaussian_filter", (1.0,)), ("uniform_filter", (3,)), ("correlate1d", ([1.0, -2.0, 1.0],)),
              ("sobel", ()), ("prewitt", ()), ("minimum_filter", (3,)), ("median_filter", (3,)),
              ("rank_filter", (2, 3)), ("correlate", (np.ones((2, 2)),)), ("laplace", ()),
              ("gaussian_laplace", (1.0,)), ("gaussian_gradient_magnitude", (1.0,))]


@pytest.mark.parametrize("name, args", BOOL_CASES, ids=[n for n, _ in BOOL_CASES])
@pytest.mark.parametrize("output", ["dtype", "array"])
@pytest.mark.parametrize("scale", [1, 16, 300])
def test_bool_outputs_hold_scipys_bytes(name, args, output, scale, rng):
    values = rng.normal(0, scale, (6, 9))
    if output == "dtype":
        ours, theirs = getattr(gnd, name)(values, *args, output=bool), getattr(snd, name)(values, *args, output=bool)
    else:
        ours, theirs = np.zeros(values.shape, bool), np.zeros(values.shape, bool)
        assert getattr(gnd, name)(values, *args, output=ours) is ours
        getattr(snd, name)(values, *args, output=theirs)
    assert ours.dtype == bool
    np.testing.assert_array_equal(ours.view(np.uint8), theirs.view(np.uint8))


@pytest.mark.parametrize("name, args", BOOL_CASES[:6], ids=[n for n, _ in BOOL_CASES[:6]])
def test_bool_input_gives_scipys_bool_result(name, args, rng):
    values = rng.integers(0, 2, (7, 8)).astype(bool)
    ours, theirs = getattr(gnd, name)(values, *args), getattr(snd, name)(values, *args)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours.view(np.uint8), theirs.view(np.uint8))


# ------------------------------------------------------- rank filters' cval

@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "int32", "uint32", "int64", "uint64"])
@pytest.mark.parametrize("cval", [-1, 300, -1.5, 255.9, -129, 70000, 1e10, -2.0**40, 2.0**63, 3e19,
                                  float("nan"), float("inf")])
def test_rank_filters_convert_cval_to_the_integer_dtype_as_scipy(dtype, cval, rng):
    values = rng.integers(0, 100, (5, 6)).astype(dtype)
    for name, args in (("rank_filter", (1,)), ("median_filter", ()), ("percentile_filter", (30,))):
        for size in (3, (2, 3)):
            np.testing.assert_array_equal(
                getattr(gnd, name)(values, *args, size=size, mode="constant", cval=cval),
                getattr(snd, name)(values, *args, size=size, mode="constant", cval=cval), err_msg=name)
    # Minima and maxima: a footprint compares as the rank filters do, a box (1-D passes) with cval
    # itself; a cval beyond int32 then reaches the output, whose conversion C leaves undefined (README).
    boxes = [np.ones((2, 3), bool)] if abs(cval) < 2**31 else []
    for footprint in [np.array([[1, 0, 1], [1, 1, 0], [0, 1, 1]], bool)] + boxes:
        for name in ("minimum_filter", "maximum_filter"):
            np.testing.assert_array_equal(
                getattr(gnd, name)(values, footprint=footprint, mode="constant", cval=cval),
                getattr(snd, name)(values, footprint=footprint, mode="constant", cval=cval), err_msg=name)


@pytest.mark.parametrize("shape", [(0, 3, 3), (3, 0, 3), (0,), (0, 3), (0, 0, 0)])
@pytest.mark.parametrize("name", ["correlate", "convolve"])
def test_weights_with_axes_of_length_0_as_scipy(name, shape, rng):
    values = random_array(rng, (3, 3), np.float64)
    try:
        expected = getattr(snd, name)(values, np.ones(shape))
    except RuntimeError:
        with pytest.raises(RuntimeError):
            getattr(gnd, name)(values, np.ones(shape))
    else:
        np.testing.assert_array_equal(getattr(gnd, name)(values, np.ones(shape)), expected)


# --------------------------------------------------- complex gradient magnitude

@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", ["gaussian_gradient_magnitude", "gaussian_laplace"])
def test_complex_derivative_sums_are_scipys(name, dtype, rng):
    z = (random_array(rng, (6, 7), np.float64) + 1j * random_array(rng, (6, 7), np.float64)).astype(dtype)
    rtol = 1e-5 if dtype == "complex64" else 1e-12
    np.testing.assert_allclose(getattr(gnd, name)(z, 1.3), getattr(snd, name)(z, 1.3), rtol=rtol, atol=rtol)
    out = np.zeros_like(z)
    assert getattr(gnd, name)(z, 1.3, output=out) is out
    np.testing.assert_allclose(out, getattr(snd, name)(z, 1.3), rtol=rtol, atol=rtol)


# ------------------------------------------------------------------ stream=

# Functions that run no CPU kernel of gpufilt's (threads=), or no work at all.
NO_THREADS = {"fourier_gaussian", "fourier_uniform", "fourier_ellipsoid", "fourier_shift", "vectorized_filter"}
NO_ARRAY_WORK = {"generate_binary_structure", "iterate_structure"}


@pytest.mark.parametrize("name", sorted(set(gnd.__all__) - NO_ARRAY_WORK))
def test_every_filter_takes_stream_and_threads(name):
    parameters = inspect.signature(getattr(gnd, name)).parameters
    assert "stream" in parameters
    assert ("threads" in parameters) == (name not in NO_THREADS)


@pytest.mark.parametrize("name, args", [("laplace", ()), ("gaussian_laplace", (1.0,)),
                                        ("gaussian_gradient_magnitude", (1.0,)),
                                        ("generic_laplace", (lambda a, ax, o, m, c: snd.correlate1d(
                                            a, [1, -2, 1], ax, o, m, c),))])
def test_derivative_sums_take_stream_on_the_cpu(name, args, x):
    np.testing.assert_allclose(getattr(gnd, name)(x, *args, stream=0), getattr(snd, name)(x, *args), rtol=1e-12)


# ------------------------------------------------- device parameters (cupyx)

@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
def test_cupy_weights_and_footprints_are_read_where_they_are(rng):
    cupy = pytest.importorskip("cupy")
    values = random_array(rng, (9, 10), np.float32)
    weights = rng.normal(size=(3, 2))
    footprint = np.array([[1, 0, 1], [0, 1, 1]], bool)
    d = cupy.asarray(values)
    cases = [("correlate", (weights,), {}), ("convolve", (weights,), {}),
             ("correlate1d", (weights[:, 0],), {}), ("convolve1d", (weights[:, 1],), {"axis": 0}),
             ("median_filter", (), {"footprint": footprint}), ("rank_filter", (1,), {"footprint": footprint}),
             ("minimum_filter", (), {"footprint": footprint}), ("maximum_filter", (), {"footprint": footprint})]
    for name, args, kwargs in cases:
        on_device = tuple(cupy.asarray(a) if isinstance(a, np.ndarray) else a for a in args)
        kw_device = {k: cupy.asarray(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        result = getattr(gnd, name)(d, *on_device, **kw_device)
        assert isinstance(result, cupy.ndarray), name
        np.testing.assert_allclose(result.get(), getattr(snd, name)(values, *args, **kwargs), rtol=1e-5,
                                   atol=1e-5, err_msg=name)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("name, args", [("laplace", ()), ("gaussian_laplace", (1.5,)),
                                        ("gaussian_gradient_magnitude", (1.5,)), ("sobel", ())])
def test_derivative_sums_run_on_the_given_stream(name, args, rng):
    cupy = pytest.importorskip("cupy")
    values = random_array(rng, (40, 50), np.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    d = cupy.asarray(values)
    cupy.cuda.get_current_stream().synchronize()
    out = getattr(gnd, name)(d, *args, stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(out.get(), getattr(snd, name)(values, *args), rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA_USABLE, reason="no usable CUDA device")
@pytest.mark.parametrize("name, args", BOOL_CASES[:8], ids=[n for n, _ in BOOL_CASES[:8]])
def test_bool_outputs_hold_scipys_bytes_on_cupy(name, args, rng):
    cupy = pytest.importorskip("cupy")
    values = rng.normal(0, 16, (6, 9)).astype(np.float32)
    ours = getattr(gnd, name)(cupy.asarray(values), *args, output=bool)
    theirs = getattr(snd, name)(values, *args, output=bool)
    np.testing.assert_array_equal(ours.view(cupy.uint8).get(), theirs.view(np.uint8))


@pytest.mark.parametrize("name, args", BOOL_CASES[:4], ids=[n for n, _ in BOOL_CASES[:4]])
def test_bool_outputs_hold_scipys_bytes_on_torch(name, args, rng):
    torch = pytest.importorskip("torch")
    values = rng.normal(0, 16, (6, 9))
    ours = getattr(gnd, name)(torch.from_numpy(values), *args, output=torch.bool)
    theirs = getattr(snd, name)(values, *args, output=bool)
    assert ours.dtype == torch.bool
    np.testing.assert_array_equal(ours.view(torch.uint8).numpy(), theirs.view(np.uint8))
