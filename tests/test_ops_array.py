"""gpufilt.ops array operations on the CPU (fill, broadcast_to, sum, add,
multiply, gather) and the bfloat16 dtype, with numpy (torch for bfloat16) as
the oracle: random data across dtypes, shapes, axes, layouts and
broadcasting, and bad input."""
from __future__ import annotations

import numpy as np
import pytest

import gpufilt
from gpufilt import _dispatch, ndimage

from _helpers import INT_DTYPES, random_array


# ----------------------------------------------------------------- bfloat16

def test_bfloat16_torch_cpu_tensor_imports_and_describes_as_bfloat16():
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).to(torch.bfloat16)[:, ::2]
    seen = gpufilt.describe(t)
    assert seen["dtype"] == "bfloat16"
    assert seen["itemsize"] == 2
    assert seen["shape"] == (3, 2)
    assert seen["strides"] == (8, 4)
    assert _dispatch.Operand(t).dtype == "bfloat16"


def test_bfloat16_dtype_compares_by_name_and_maps_back_to_torch():
    torch = pytest.importorskip("torch")
    assert _dispatch.is_bfloat16(_dispatch.BFLOAT16)
    assert _dispatch.dtype_kind(_dispatch.BFLOAT16) == "f"
    assert _dispatch._torch_dtype(_dispatch.BFLOAT16) is torch.bfloat16
    assert _dispatch._numpy_dtype(torch.float32) == np.float32


@pytest.mark.parametrize("where", ["input", "output"])
def test_ndimage_refuses_bfloat16_with_type_error(where, rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(random_array(rng, (5, 6), "float32"))
    b = x.to(torch.bfloat16)
    before = b.clone()
    with pytest.raises(TypeError, match="bfloat16"):
        if where == "input":
            ndimage.gaussian_filter(b, 1.0)
        else:
            ndimage.uniform_filter(x, 3, output=b)
    assert torch.equal(b, before)


def test_ndimage_still_refuses_and_accepts_what_it_did(rng):
    x = random_array(rng, (6, 7), "float16")
    assert ndimage.uniform_filter(x, 3).dtype == np.float16
    with pytest.raises(TypeError):
        ndimage.uniform_filter(np.zeros((3, 3), dtype="datetime64[s]"), 3)


# ------------------------------------------------------------------ layouts

from gpufilt import ops  # noqa: E402

REAL_DTYPES = ["bool"] + INT_DTYPES + ["float16", "float32", "float64"]
NUMERIC_DTYPES = INT_DTYPES + ["float16", "float32", "float64"]


def layout(x, kind):
    """A view of `x`'s values (same shape) in memory layout `kind`."""
    x = np.asarray(x)
    if kind == "C":
        return np.ascontiguousarray(x)
    if kind == "F":
        return np.asfortranarray(x)
    if kind == "strided":
        big = np.zeros(tuple(2 * n for n in x.shape), dtype=x.dtype)
        view = big[(Ellipsis,) + tuple(slice(None, None, 2) for _ in x.shape)]
        view[...] = x
        return view
    if kind == "negative":
        flip = (Ellipsis,) + tuple(slice(None, None, -1) for _ in x.shape)
        return np.ascontiguousarray(x[flip])[flip]
    raise AssertionError(kind)


LAYOUTS = ["C", "F", "strided", "negative"]
SHAPES = [(), (0,), (7,), (5, 6), (3, 4, 5), (2, 0, 3)]


def assert_same(actual, expected):
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                   rtol=RTOL_OF[expected.dtype.itemsize], atol=0)
    else:
        np.testing.assert_array_equal(actual, expected)


RTOL_OF = {2: 1e-3, 4: 1e-6, 8: 1e-12}


# -------------------------------------------------------------------- fill

@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (5, 6), (3, 4, 5)])
def test_fill_sets_every_element_like_numpy(dtype, kind, shape, rng):
    x = layout(random_array(rng, shape, dtype), kind)
    value = True if dtype == "bool" else 3
    expected = x.copy()
    expected.fill(value)
    assert ops.fill(x, value) is x
    assert_same(x, expected)


@pytest.mark.parametrize("value", [2.75, -1.5, 7, True])
@pytest.mark.parametrize("dtype", ["int16", "uint8", "float16", "float32", "bool"])
def test_fill_converts_the_value_as_numpy_does(value, dtype, rng):
    if dtype == "uint8" and value == -1.5:
        pytest.skip("numpy's cast of a negative float to uint8 is undefined")
    x = random_array(rng, (4, 3), dtype)
    expected = x.copy()
    expected.fill(value)
    ops.fill(x, value)
    assert_same(x, expected)


def test_fill_out_of_range_integer_raises_and_leaves_x_untouched(rng):
    x = random_array(rng, (5,), "int8")
    before = x.copy()
    with pytest.raises(OverflowError):
        ops.fill(x, 1000)
    np.testing.assert_array_equal(x, before)


def test_fill_read_only_raises_value_error(rng):
    x = random_array(rng, (5,), "float32")
    x.flags.writeable = False
    with pytest.raises(ValueError, match="x"):
        ops.fill(x, 1.0)


# ------------------------------------------------------------- broadcast_to

@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("src_shape,out_shape", [
    ((), (3, 4)), ((4,), (3, 4)), ((3, 1), (3, 4)), ((1, 1), (2, 3)), ((2, 3, 1), (4, 2, 3, 5)),
    ((5,), (0, 5)), ((3, 4), (3, 4))])
@pytest.mark.parametrize("kind", ["C", "F", "strided", "negative"])
def test_broadcast_to_writes_numpy_broadcast(dtype, src_shape, out_shape, kind, rng):
    x = layout(random_array(rng, src_shape, dtype), kind)
    out = layout(random_array(rng, out_shape, dtype), kind)
    assert ops.broadcast_to(x, out) is out
    assert_same(out, np.broadcast_to(x, out_shape))


def test_broadcast_to_bad_shape_and_dtype_raise_and_leave_out_untouched(rng):
    x = random_array(rng, (3,), "float32")
    out = random_array(rng, (2, 4), "float32")
    before = out.copy()
    with pytest.raises(ValueError, match="broadcast"):
        ops.broadcast_to(x, out)
    with pytest.raises(TypeError, match="out"):
        ops.broadcast_to(x, random_array(rng, (2, 3), "float64"))
    np.testing.assert_array_equal(out, before)


# ----------------------------------------------------------------------- sum

AXES = [None, 0, -1, (0, 1), (1,), (0, 2), (2, 0, 1), ()]


@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("kind", LAYOUTS)
def test_sum_matches_numpy_for_axes_layouts_and_dtypes(dtype, axis, kind, rng):
    x = layout(random_array(rng, (5, 6, 7), dtype), kind)
    expected = np.sum(x, axis=axis)
    if np.dtype(dtype).kind == "f":  # numpy's float16/32 sums are less exact than gpufilt's
        expected = np.sum(x.astype(np.float64), axis=axis).astype(dtype)
    assert_same(np.asarray(ops.sum(x, axis=axis)), np.asarray(expected))


@pytest.mark.parametrize("shape,axis", [((), None), ((0,), None), ((0, 3), 0), ((3, 0), 1), ((2, 0, 3), (0, 2)),
                                        ((1, 1), None), ((1, 7), 0), ((9,), 0)])
def test_sum_of_empty_and_length_one_axes_matches_numpy(shape, axis, rng):
    x = random_array(rng, shape, "float64")
    assert_same(np.asarray(ops.sum(x, axis=axis)), np.asarray(np.sum(x, axis=axis)))


@pytest.mark.parametrize("axis", [None, 0, (0, 2)])
def test_sum_keepdims_matches_numpy(axis, rng):
    x = random_array(rng, (4, 5, 6), "int32")
    assert_same(ops.sum(x, axis=axis, keepdims=True), np.sum(x, axis=axis, keepdims=True))


@pytest.mark.parametrize("dtype,sum_dtype", [("int8", "int8"), ("int32", "float32"), ("float64", "int64"),
                                             ("uint8", "uint16"), ("float32", "float64"), ("int16", "bool")])
def test_sum_dtype_argument_matches_numpy(dtype, sum_dtype, rng):
    x = random_array(rng, (6, 50), dtype)
    expected = np.sum(x, axis=1, dtype=sum_dtype)
    assert_same(ops.sum(x, axis=1, dtype=sum_dtype), expected)


def test_sum_of_int64_wraps_around_as_numpy():
    x = np.array([2 ** 62, 2 ** 62, 2 ** 62, 5], dtype=np.int64)
    assert ops.sum(x) == x.sum()
    u = np.array([2 ** 63, 2 ** 63, 7], dtype=np.uint64)
    assert ops.sum(u) == u.sum()


def test_float32_sum_of_2_to_24_plus_elements_matches_float64(rng):
    x = (rng.random(2 ** 24 + 3) + 0.5).astype(np.float32)
    exact = np.sum(x, dtype=np.float64)
    assert abs(float(ops.sum(x)) - exact) <= 1e-6 * abs(exact)
    two_d = x[:2 ** 24].reshape(2 ** 12, 2 ** 12)
    np.testing.assert_allclose(ops.sum(two_d, axis=0), np.sum(two_d, axis=0, dtype=np.float64), rtol=1e-6)


def test_float64_sum_is_as_accurate_as_pairwise(rng):
    import math
    x = rng.random(10 ** 6) + 1.0
    exact = math.fsum(x)
    assert abs(float(ops.sum(x)) - exact) <= 1e-14 * exact
    columns = x.reshape(1000, 1000)
    exact_columns = np.array([math.fsum(c) for c in columns.T])
    np.testing.assert_allclose(ops.sum(columns, axis=0), exact_columns, rtol=1e-14)


def test_sum_out_is_written_in_place_and_returned(rng):
    x = random_array(rng, (4, 5), "float32")
    out = np.empty(5, dtype=np.float64)
    assert ops.sum(x, axis=0, out=out) is out
    np.testing.assert_allclose(out, x.astype(np.float64).sum(0), rtol=1e-12)
    col = np.zeros((4, 2))[:, 0]
    assert ops.sum(x, axis=1, out=col) is col
    np.testing.assert_allclose(col, x.astype(np.float64).sum(1), rtol=1e-6)


def test_sum_bad_arguments_raise_and_leave_out_untouched(rng):
    x = random_array(rng, (4, 5), "float64")
    out = np.full(5, 9.0)
    with pytest.raises(ValueError, match="out"):
        ops.sum(x, axis=1, out=out)
    with pytest.raises(TypeError, match="out"):
        ops.sum(x, axis=0, out=np.zeros(5, np.int64))
    with pytest.raises(np.exceptions.AxisError):
        ops.sum(x, axis=2)
    with pytest.raises(ValueError, match="duplicate"):
        ops.sum(x, axis=(0, 0))
    with pytest.raises(TypeError, match="complex"):
        ops.sum(x.astype(np.complex64))
    with pytest.raises(ValueError, match="overlaps"):
        ops.sum(x, axis=0, out=x[0])
    np.testing.assert_array_equal(out, np.full(5, 9.0))


# ---------------------------------------------------------- add and multiply

BINARY = [("add", np.add), ("multiply", np.multiply)]


@pytest.mark.parametrize("name,ufunc", BINARY)
@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES)
def test_binary_same_shape_matches_numpy(name, ufunc, dtype, kind, shape, rng):
    a = layout(random_array(rng, shape, dtype), kind)
    b = layout(random_array(rng, shape, dtype), "C")
    with np.errstate(over="ignore"):
        expected = ufunc(a, b)
    assert_same(np.asarray(getattr(ops, name)(a, b)), np.asarray(expected))


@pytest.mark.parametrize("name,ufunc", BINARY)
@pytest.mark.parametrize("shape_a,shape_b", [((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)), ((), (5,)),
                                             ((5, 1, 2), (3, 1)), ((0, 4), (4,)), ((4,), (2, 1, 4))])
def test_binary_broadcasts_like_numpy(name, ufunc, shape_a, shape_b, rng):
    a = random_array(rng, shape_a, "float32")
    b = layout(random_array(rng, shape_b, "float32"), "negative")
    assert_same(np.asarray(getattr(ops, name)(a, b)), np.asarray(ufunc(a, b)))


@pytest.mark.parametrize("name,ufunc", BINARY)
@pytest.mark.parametrize("dtype_a,dtype_b", [("int8", "int64"), ("uint8", "int8"), ("int32", "float32"),
                                             ("float16", "float32"), ("bool", "int16"), ("uint64", "int64"),
                                             ("float16", "int8"), ("uint32", "float64")])
def test_binary_mixed_dtypes_take_numpy_result_type(name, ufunc, dtype_a, dtype_b, rng):
    a = random_array(rng, (6, 5), dtype_a)
    b = random_array(rng, (5,), dtype_b)
    with np.errstate(over="ignore"):
        expected = ufunc(a, b)
    assert_same(getattr(ops, name)(a, b), expected)
    assert_same(getattr(ops, name)(b, a), ufunc(b, a))


@pytest.mark.parametrize("name,ufunc", BINARY)
@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("scalar", [3, -2, 2.5, True])
def test_binary_with_python_scalar_follows_nep50(name, ufunc, dtype, scalar, rng):
    a = layout(random_array(rng, (4, 5), dtype), "strided")
    if np.dtype(dtype).kind == "u" and scalar == -2:
        with pytest.raises(OverflowError):
            ufunc(a, scalar)
        with pytest.raises(OverflowError):
            getattr(ops, name)(a, scalar)
        return
    with np.errstate(over="ignore"):
        expected = ufunc(a, scalar)
        assert_same(getattr(ops, name)(a, scalar), expected)
        assert_same(getattr(ops, name)(scalar, a), ufunc(scalar, a))


def test_binary_with_numpy_scalar_is_typed(rng):
    a = random_array(rng, (4,), "float32")
    assert_same(ops.add(a, np.float64(0.5)), np.add(a, np.float64(0.5)))
    i = random_array(rng, (4,), "int8")
    assert_same(ops.multiply(i, np.int32(3)), np.multiply(i, np.int32(3)))


def test_binary_integer_overflow_wraps_as_numpy():
    a = np.array([127, -128, 100], dtype=np.int8)
    assert_same(ops.add(a, a), a + a)
    assert_same(ops.multiply(a, a), a * a)
    u = np.array([2 ** 64 - 1, 2 ** 63], dtype=np.uint64)
    assert_same(ops.multiply(u, u), u * u)


@pytest.mark.parametrize("name,ufunc", BINARY)
def test_binary_out_in_place_and_aliasing_an_input(name, ufunc, rng):
    a = random_array(rng, (5, 6), "float64")
    b = random_array(rng, (6,), "float64")
    expected = ufunc(a, b)
    out = np.empty((5, 6))
    assert getattr(ops, name)(a, b, out=out) is out
    assert_same(out, expected)
    assert getattr(ops, name)(a, b, out=a) is a
    assert_same(a, expected)


def test_binary_bad_input_raises_and_leaves_out_untouched(rng):
    a = random_array(rng, (3, 4), "float32")
    out = np.full((3, 4), 7.0, dtype=np.float32)
    with pytest.raises(ValueError, match="broadcast"):
        ops.add(a, random_array(rng, (3,), "float32"), out=out)
    with pytest.raises(TypeError, match="out"):
        ops.add(a, a, out=np.zeros((3, 4), np.float64))
    with pytest.raises(ValueError, match="out"):
        ops.multiply(a, a, out=np.zeros((4, 3), np.float32))
    with pytest.raises(TypeError, match="complex"):
        ops.add(a, 1j)
    with pytest.raises(ValueError, match="overlaps"):
        ops.add(a, a[0], out=a)
    with pytest.raises(OverflowError):
        ops.add(random_array(rng, (2,), "int8"), 1000)
    np.testing.assert_array_equal(out, np.full((3, 4), 7.0, dtype=np.float32))


# -------------------------------------------------------------------- gather

@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("index_dtype", INT_DTYPES)
def test_gather_matches_numpy_take_for_dtypes(dtype, index_dtype, rng):
    source = random_array(rng, (5, 4), dtype)
    index = rng.integers(0, 5, size=(3, 2)).astype(index_dtype)
    assert_same(ops.gather(source, index), np.take(source, index, axis=0))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("index_shape", [(), (4,), (2, 3), (0,)])
def test_gather_matches_numpy_take_for_axes_and_layouts(axis, kind, index_shape, rng):
    source = layout(random_array(rng, (3, 4, 5), "float32"), kind)
    n = source.shape[axis]
    index = layout(rng.integers(-n, n, size=index_shape), kind)
    assert_same(ops.gather(source, index, axis=axis), np.take(source, index, axis=axis))


def test_gather_out_is_written_and_returned(rng):
    source = random_array(rng, (6, 3), "float64")
    index = np.array([5, -6, 2])
    out = np.empty((3, 3))
    assert ops.gather(source, index, out=out) is out
    assert_same(out, np.take(source, index, axis=0))


@pytest.mark.parametrize("bad", [6, -7, 100])
def test_gather_out_of_range_raises_index_error_and_writes_nothing(bad, rng):
    source = random_array(rng, (6, 3), "float32")
    index = np.array([0, bad, 1])
    out = np.full((3, 3), 5.0, dtype=np.float32)
    with pytest.raises(IndexError, match=str(bad)):
        ops.gather(source, index, out=out)
    np.testing.assert_array_equal(out, np.full((3, 3), 5.0, dtype=np.float32))
    with pytest.raises(IndexError):
        np.take(source, index, axis=0)


def test_gather_uint64_index_beyond_int64_is_out_of_range(rng):
    with pytest.raises(IndexError):
        ops.gather(random_array(rng, (4,), "int32"), np.array([2 ** 63 + 1], dtype=np.uint64))


def test_gather_bad_arguments_raise(rng):
    source = random_array(rng, (4, 3), "float32")
    with pytest.raises(TypeError, match="index"):
        ops.gather(source, np.array([0.0, 1.0]))
    with pytest.raises(np.exceptions.AxisError):
        ops.gather(source, np.array([0]), axis=2)
    with pytest.raises(ValueError, match="out"):
        ops.gather(source, np.array([0]), out=np.empty((2, 3), np.float32))
    with pytest.raises(TypeError, match="out"):
        ops.gather(source, np.array([0]), out=np.empty((1, 3), np.float64))


# ------------------------------------------------------------------- devices

def test_ops_return_the_callers_library_torch_cpu(rng):
    torch = pytest.importorskip("torch")
    a = torch.from_numpy(random_array(rng, (3, 4), "float32"))
    r = ops.add(a, a)
    assert isinstance(r, torch.Tensor)
    torch.testing.assert_close(r, a + a)
    s = ops.sum(a, axis=0)
    assert isinstance(s, torch.Tensor) and s.shape == (4,)


# ------------------------------------------------------------- bfloat16 ops

def test_bfloat16_torch_cpu_ops_match_torch(rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(random_array(rng, (6, 7), "float32")).to(torch.bfloat16)
    y = torch.from_numpy(random_array(rng, (7,), "float32")).to(torch.bfloat16)
    torch.testing.assert_close(ops.add(x, y), x + y, rtol=0, atol=0)
    torch.testing.assert_close(ops.multiply(x, y), x * y, rtol=0, atol=0)
    assert ops.add(x, 2).dtype == torch.bfloat16
    torch.testing.assert_close(ops.sum(x, axis=1), x.double().sum(1).to(torch.bfloat16), rtol=0, atol=0)
    torch.testing.assert_close(ops.gather(x, torch.tensor([3, -1])), x[[3, -1]], rtol=0, atol=0)
    assert ops.add(x, x.float()).dtype == torch.float32
    out = torch.empty(3, 6, 7, dtype=torch.bfloat16)
    ops.broadcast_to(x, out)
    assert torch.equal(out, x.expand(3, 6, 7))
    ops.fill(out, 1.2)
    assert torch.equal(out, torch.full_like(out, 1.2))


def test_bfloat16_rounds_to_nearest_even_and_keeps_nan():
    torch = pytest.importorskip("torch")
    values = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 1.0 + 2 ** -8 + 2 ** -20, float("nan"),
                           float("inf"), -0.0, 3.4e38, 1e-40], dtype=torch.float32)
    out = torch.empty(values.shape, dtype=torch.bfloat16)
    zeros = torch.zeros(values.shape, dtype=torch.bfloat16)
    ops.add(values, zeros, out=torch.empty(values.shape, dtype=torch.float32))
    ops.add(zeros, 0, out=out)
    for i, v in enumerate(values.tolist()):
        ops.fill(out[i], v)
    expected = values.to(torch.bfloat16)
    assert torch.equal(out.view(torch.int16)[:3], expected.view(torch.int16)[:3])
    assert torch.isnan(out[3])
    assert torch.equal(out[4:].float(), expected[4:].float())
