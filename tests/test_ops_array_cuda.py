"""gpufilt.ops array operations on CUDA arrays: cupy (dtypes, layouts, axes,
broadcasting, out=), torch CUDA tensors (bfloat16 included), streams, CUDA
graph capture, and the GPU gather's out-of-range error. numpy (torch for
bfloat16) on host copies is the oracle; results are copied back in the test
only."""
from __future__ import annotations

import numpy as np
import pytest

from gpufilt import ops

from _helpers import INT_DTYPES, random_array

pytestmark = pytest.mark.cuda

cupy = pytest.importorskip("cupy")

REAL_DTYPES = ["bool"] + INT_DTYPES + ["float16", "float32", "float64"]
RTOL = {2: 1e-3, 4: 1e-6, 8: 1e-12}


def on_gpu(x, kind="C"):
    """A cupy array with x's values in layout `kind`."""
    x = np.asarray(x)
    if kind == "C" or x.ndim == 0:  # a 0-d array has one layout (cupy's asfortranarray would make it 1-d)
        return cupy.asarray(x)
    if kind == "F":
        return cupy.asfortranarray(cupy.asarray(x))
    if kind == "strided":
        big = cupy.zeros(tuple(2 * n for n in x.shape), dtype=x.dtype)
        view = big[(Ellipsis,) + tuple(slice(None, None, 2) for _ in x.shape)]
        view[...] = cupy.asarray(x)
        return view
    if kind == "negative":
        flip = (Ellipsis,) + tuple(slice(None, None, -1) for _ in x.shape)
        return cupy.ascontiguousarray(cupy.asarray(x)[flip])[flip]
    raise AssertionError(kind)


def assert_same(actual, expected):
    actual = cupy.asnumpy(actual) if isinstance(actual, cupy.ndarray) else np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                   rtol=RTOL[expected.dtype.itemsize], atol=0)
    else:
        np.testing.assert_array_equal(actual, expected)


LAYOUTS = ["C", "F", "strided", "negative"]


# -------------------------------------------------------------------- fill

@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (33, 65), (3, 4, 5)])
def test_fill_cupy(dtype, kind, shape, rng):
    x = on_gpu(random_array(rng, shape, dtype), kind)
    value = True if dtype == "bool" else 5
    assert ops.fill(x, value) is x
    expected = np.empty(shape, dtype)
    expected.fill(value)
    assert_same(x, expected)


def test_fill_large_contiguous_and_odd_offset(rng):
    x = cupy.zeros(1000003, dtype=cupy.float32)
    ops.fill(x[1:], 2.5)  # 4-byte aligned, not 16: vector body and element tail
    host = cupy.asnumpy(x)
    assert host[0] == 0 and (host[1:] == 2.5).all()


# ------------------------------------------------------------- broadcast_to

@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("src_shape,out_shape", [((), (3, 4)), ((4,), (3, 4)), ((3, 1), (3, 4)),
                                                 ((2, 3, 1), (4, 2, 3, 5)), ((3, 4), (3, 4)), ((5,), (0, 5))])
@pytest.mark.parametrize("kind", LAYOUTS)
def test_broadcast_to_cupy(dtype, src_shape, out_shape, kind, rng):
    host = random_array(rng, src_shape, dtype)
    out = on_gpu(random_array(rng, out_shape, dtype), kind)
    assert ops.broadcast_to(on_gpu(host, kind), out) is out
    assert_same(out, np.broadcast_to(host, out_shape))


# ----------------------------------------------------------------------- sum

@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1), (0, 2), ()])
@pytest.mark.parametrize("kind", LAYOUTS)
def test_sum_cupy(dtype, axis, kind, rng):
    host = random_array(rng, (5, 6, 7), dtype)
    expected = np.sum(host, axis=axis)
    if np.dtype(dtype).kind == "f":
        expected = np.sum(host.astype(np.float64), axis=axis).astype(dtype)
    assert_same(ops.sum(on_gpu(host, kind), axis=axis), expected)


@pytest.mark.parametrize("shape,axis", [((3000, 5), 0), ((5, 3000), 1), ((70000,), None), ((9, 2500, 3), 1),
                                        ((0, 4), 0), ((4, 0), 1), ((40, 50, 60), (0, 2))])
def test_sum_cupy_row_and_column_modes_match_float64(shape, axis, rng):
    host = random_array(rng, shape, "float32")
    got = ops.sum(on_gpu(host), axis=axis)
    assert_same(got, np.sum(host.astype(np.float64), axis=axis).astype(np.float32))


def test_sum_cupy_float32_2_to_25_elements_is_accurate_and_deterministic(rng):
    x = cupy.asarray((rng.random(2 ** 25) + 0.5).astype(np.float32))
    exact = float(cupy.sum(x, dtype=cupy.float64))
    first = float(ops.sum(x))
    assert abs(first - exact) <= 1e-6 * exact
    assert all(float(ops.sum(x)) == first for _ in range(3))  # no atomics: same bits every run


def test_sum_cupy_int_wraps_and_keepdims_and_out(rng):
    x = cupy.asarray(np.array([[2 ** 62, 2 ** 62], [2 ** 62, 5]], dtype=np.int64))
    assert_same(ops.sum(x, axis=0, keepdims=True), np.sum(cupy.asnumpy(x), axis=0, keepdims=True))
    out = cupy.empty(2, dtype=cupy.float64)
    assert ops.sum(x, axis=1, out=out) is out


@pytest.mark.parametrize("dtype,sum_dtype", [("int32", "float32"), ("float64", "int64"), ("uint8", "uint16"),
                                             ("int16", "bool"), ("bool", "int64")])
def test_sum_cupy_dtype_argument(dtype, sum_dtype, rng):
    host = random_array(rng, (6, 3000), dtype)
    assert_same(ops.sum(on_gpu(host), axis=1, dtype=sum_dtype), np.sum(host, axis=1, dtype=sum_dtype))


# ---------------------------------------------------------- add and multiply

@pytest.mark.parametrize("name,ufunc", [("add", np.add), ("multiply", np.multiply)])
@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("kind", LAYOUTS)
def test_binary_cupy_same_shape(name, ufunc, dtype, kind, rng):
    a, b = random_array(rng, (37, 41), dtype), random_array(rng, (37, 41), dtype)
    with np.errstate(over="ignore"):
        expected = ufunc(a, b)
    assert_same(getattr(ops, name)(on_gpu(a, kind), on_gpu(b)), expected)


@pytest.mark.parametrize("name,ufunc", [("add", np.add), ("multiply", np.multiply)])
@pytest.mark.parametrize("shape_a,shape_b", [((300, 257), (257,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)),
                                             ((), (5,)), ((0, 4), (4,))])
def test_binary_cupy_broadcasts(name, ufunc, shape_a, shape_b, rng):
    a, b = random_array(rng, shape_a, "float32"), random_array(rng, shape_b, "float32")
    assert_same(getattr(ops, name)(on_gpu(a), on_gpu(b, "negative")), ufunc(a, b))


@pytest.mark.parametrize("name,ufunc", [("add", np.add), ("multiply", np.multiply)])
@pytest.mark.parametrize("dtype_a,dtype_b", [("int8", "int64"), ("int32", "float32"), ("float16", "float32"),
                                             ("bool", "int16"), ("uint64", "int64")])
def test_binary_cupy_mixed_dtypes(name, ufunc, dtype_a, dtype_b, rng):
    a, b = random_array(rng, (60, 5), dtype_a), random_array(rng, (5,), dtype_b)
    with np.errstate(over="ignore"):
        assert_same(getattr(ops, name)(on_gpu(a), on_gpu(b)), ufunc(a, b))


@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("scalar", [3, 2.5, True])
def test_binary_cupy_scalar_by_value(dtype, scalar, rng):
    a = random_array(rng, (1001,), dtype)
    with np.errstate(over="ignore"):
        assert_same(ops.add(on_gpu(a), scalar), np.add(a, scalar))
        assert_same(ops.multiply(scalar, on_gpu(a, "strided")), np.multiply(scalar, a))


def test_binary_cupy_out_in_place(rng):
    a, b = random_array(rng, (64, 64), "float32"), random_array(rng, (64,), "float32")
    x = on_gpu(a)
    assert ops.add(x, on_gpu(b), out=x) is x
    assert_same(x, a + b)


def test_binary_mixed_devices_raise_value_error(rng):
    a = random_array(rng, (4,), "float32")
    with pytest.raises(ValueError, match="device|CPU"):
        ops.add(on_gpu(a), a)
    with pytest.raises(ValueError, match="device|CPU"):
        ops.add(a, on_gpu(a))
    with pytest.raises(ValueError, match="device|CPU"):
        ops.sum(on_gpu(a), out=np.empty((), np.float32))


# -------------------------------------------------------------------- gather

@pytest.mark.parametrize("dtype", REAL_DTYPES)
@pytest.mark.parametrize("index_dtype", ["int8", "uint8", "int32", "int64", "uint64"])
def test_gather_cupy(dtype, index_dtype, rng):
    source = random_array(rng, (50, 8), dtype)
    index = rng.integers(0, 50, size=(7, 3)).astype(index_dtype)
    assert_same(ops.gather(on_gpu(source), on_gpu(index)), np.take(source, index, axis=0))


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("kind", LAYOUTS)
def test_gather_cupy_axes_layouts_negative_indices(axis, kind, rng):
    source = random_array(rng, (6, 7, 8), "float64")
    n = source.shape[axis]
    index = rng.integers(-n, n, size=(4, 2))
    assert_same(ops.gather(on_gpu(source, kind), on_gpu(index, kind), axis=axis), np.take(source, index, axis=axis))


def test_gather_cupy_out_of_range_raises_index_error_without_crashing(rng):
    source = on_gpu(random_array(rng, (6, 3), "float32"))
    index = on_gpu(np.array([0, 9, 1]))
    out = ops.gather(source, index)  # enqueued; cannot raise without a sync
    with pytest.raises(IndexError, match="9"):
        ops.check_errors(source)
    host = cupy.asnumpy(out)  # the context is healthy; the bad row is zeros
    np.testing.assert_array_equal(host[1], 0)
    np.testing.assert_array_equal(host[0], cupy.asnumpy(source)[0])
    ops.check_errors(source)  # the record was cleared


def test_gather_cupy_error_surfaces_at_next_call(rng):
    source = on_gpu(random_array(rng, (6, 3), "float32"))
    ops.gather(source, on_gpu(np.array([-7])))
    cupy.cuda.get_current_stream().synchronize()
    with pytest.raises(IndexError, match="-7"):
        ops.add(source, 1.0)
    assert_same(ops.add(source, 1.0), cupy.asnumpy(source) + np.float32(1.0))


# ------------------------------------------------------------------- torch

def test_torch_cuda_ops_and_bfloat16(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    x = torch.from_numpy(random_array(rng, (64, 33), "float32")).cuda().to(torch.bfloat16)
    y = torch.from_numpy(random_array(rng, (33,), "float32")).cuda().to(torch.bfloat16)
    r = ops.add(x, y)
    assert r.is_cuda and r.dtype == torch.bfloat16
    torch.testing.assert_close(r, x + y, rtol=0, atol=0)
    torch.testing.assert_close(ops.multiply(x, y), x * y, rtol=0, atol=0)
    torch.testing.assert_close(ops.sum(x, axis=0), x.double().sum(0).to(torch.bfloat16), rtol=0, atol=0)
    torch.testing.assert_close(ops.gather(x, torch.tensor([5, -1], device="cuda")), x[[5, -1]])
    out = torch.empty(3, 64, 33, dtype=torch.bfloat16, device="cuda")
    assert ops.broadcast_to(x, out) is out
    assert torch.equal(out, x.expand(3, 64, 33))
    assert ops.fill(out, 0.3) is out
    assert torch.equal(out, torch.full_like(out, 0.3))
    h = torch.from_numpy(random_array(rng, (1000,), "float16")).cuda()
    torch.testing.assert_close(ops.add(h, h), h + h, rtol=0, atol=0)


def test_torch_cuda_runs_on_current_stream(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.from_numpy(random_array(rng, (1 << 20,), "float32")).cuda()
        r = ops.multiply(x, 2.0)
        total = ops.sum(r)
    s.synchronize()
    torch.testing.assert_close(r, x * 2)
    torch.testing.assert_close(total, (x.double() * 2).sum().float(), rtol=1e-6, atol=0)


# ------------------------------------------------------------ streams, graphs

def test_explicit_cupy_stream(rng):
    s = cupy.cuda.Stream(non_blocking=True)
    a = random_array(rng, (513, 257), "float32")
    with s:
        x = cupy.asarray(a)
    s.synchronize()
    r = ops.add(x, x, stream=s)
    t = ops.sum(x, axis=1, stream=s)
    s.synchronize()
    assert_same(r, a + a)
    assert_same(t, a.astype(np.float64).sum(1).astype(np.float32))


def test_cuda_graph_capture_of_ops_replays_on_new_data(rng):
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        x = cupy.asarray(random_array(rng, (300, 200), np.float32))
        b = cupy.asarray(random_array(rng, (200,), np.float32))
        y = cupy.zeros_like(x)
        total = cupy.zeros((200,), np.float32)
        idx = cupy.asarray(np.array([3, -1, 0]))
        rows = cupy.zeros((3, 200), np.float32)
    s.synchronize()
    with s:
        s.begin_capture()
        try:
            ops.multiply(x, b, out=y)
            ops.add(y, 1.5, out=y)
            ops.sum(y, axis=0, out=total)  # uses a stream-ordered temporary
            ops.gather(y, idx, out=rows)
            ops.fill(x, 0.0)
        finally:
            graph = s.end_capture()
    new = random_array(rng, x.shape, np.float32)
    x.set(new, stream=s)
    graph.launch(stream=s)
    s.synchronize()
    expected = new * cupy.asnumpy(b) + np.float32(1.5)
    assert_same(y, expected)
    np.testing.assert_allclose(cupy.asnumpy(total), expected.astype(np.float64).sum(0), rtol=1e-5)
    assert_same(rows, expected[[3, -1, 0]])
    assert (cupy.asnumpy(x) == 0).all()


# ------------------------------------------------ fast paths (layout-chosen)
# The CUDA kernels pick 16-byte-word paths from the layout: contiguous sums,
# sums over leading axes with a contiguous last axis, gathers of contiguous
# slabs, broadcasts whose inner run is contiguous. Each is checked at sizes
# that are not multiples of the word, on views one element off a 16-byte
# boundary (element-wise fallback) and with rows that are not 16-byte
# multiples.

FAST_DTYPES = ["bool", "int8", "uint16", "int32", "int64", "float16", "float32", "float64"]


def expected_sum(host, axis=None):
    if host.dtype.kind == "f":
        return np.sum(host.astype(np.float64), axis=axis).astype(host.dtype)
    return np.sum(host, axis=axis)


def assert_sum_matches(actual, host, axis=None):
    """ops.sum's result against numpy's in float64: integers exactly, floats
    within the dtype's tolerance of the summed magnitudes, sum(|x|) (a sum
    that cancels to near zero keeps the absolute error of its terms)."""
    expected = expected_sum(host, axis)
    if host.dtype.kind != "f":
        assert_same(actual, expected)
        return
    actual = cupy.asnumpy(actual)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    error = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    scale = np.sum(np.abs(host.astype(np.float64)), axis=axis)
    assert np.all(error <= RTOL[host.dtype.itemsize] * scale), float(np.max(error / np.maximum(scale, 1e-300)))


@pytest.mark.parametrize("dtype", FAST_DTYPES)
@pytest.mark.parametrize("n", [1, 15, 16, 17, 4099, 1000003])
@pytest.mark.parametrize("offset", [0, 1])
def test_sum_contiguous_fast_path(dtype, n, offset, rng):
    host = random_array(rng, (n + offset,), dtype)
    x = cupy.asarray(host)[offset:]  # offset 1: the first 16-byte word starts later
    assert_sum_matches(ops.sum(x), host[offset:])


@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64"])
# (3, 300001): fewer outputs than blocks in a wave, so each row is split
# among blocks whose partial sums are then added
@pytest.mark.parametrize("shape", [(300, 4096), (301, 4095), (7, 33), (3, 5, 1001), (3, 300001)])
@pytest.mark.parametrize("offset", [0, 1])
def test_sum_last_axis_rows_fast_path(dtype, shape, offset, rng):
    host = random_array(rng, shape[:-1] + (shape[-1] + offset,), dtype)
    x = cupy.asarray(host)[..., offset:]  # each row starts at its own alignment
    assert_sum_matches(ops.sum(x, axis=-1), host[..., offset:], axis=-1)


def test_sum_contiguous_fast_path_is_deterministic_and_accurate(rng):
    x = cupy.asarray((rng.random(2 ** 24 + 5) + 0.5).astype(np.float32))[1:]
    exact = float(cupy.sum(x, dtype=cupy.float64))
    first = float(ops.sum(x, dtype="float64"))
    assert abs(first - exact) <= 1e-12 * exact
    assert all(float(ops.sum(x, dtype="float64")) == first for _ in range(3))


# Columns are read as words of 16 bytes (8 for 1-byte dtypes: (700, 72)
# has 72-byte rows) while whole steps of rows remain, then row by row.
@pytest.mark.parametrize("dtype", FAST_DTYPES)
@pytest.mark.parametrize("shape", [(3000, 4096), (1000, 4095), (70001, 8), (300001, 5), (5, 64), (700, 72)])
def test_sum_leading_axis_fast_path(dtype, shape, rng):
    host = random_array(rng, shape, dtype)
    assert_sum_matches(ops.sum(cupy.asarray(host), axis=0), host, axis=0)


@pytest.mark.parametrize("dtype", FAST_DTYPES)
def test_sum_leading_axis_padded_rows_and_unmerged_axes(dtype, rng):
    """Rows 16-byte aligned but 21 of 24 elements used: the last group of
    each row is partial (element loads); then two reduced axes that do not
    merge into one (every step row by row)."""
    host = random_array(rng, (3001, 24), dtype)
    view = cupy.asarray(host)[:, :21]
    assert_sum_matches(ops.sum(view, axis=0), host[:, :21], axis=0)
    host = random_array(rng, (6, 600, 64), dtype)
    view = cupy.asarray(host)[:, :500]
    assert_sum_matches(ops.sum(view, axis=(0, 1)), host[:, :500], axis=(0, 1))


@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
def test_sum_leading_axes_misaligned_and_outer_kept_axis(dtype, rng):
    host = random_array(rng, (6, 500, 65), dtype)
    view = cupy.asarray(host)[..., 1:]  # one element off: element-wise columns
    assert_sum_matches(ops.sum(view, axis=1), host[..., 1:], axis=1)
    assert_sum_matches(ops.sum(view, axis=(0, 1)), host[..., 1:], axis=(0, 1))
    host = np.ascontiguousarray(host[..., :64])
    assert_same(ops.sum(cupy.asarray(host), axis=(0, 1), keepdims=True),
                expected_sum(host, axis=(0, 1)).reshape(1, 1, 64))
    assert_sum_matches(ops.sum(cupy.asarray(host), axis=1), host, axis=1)


def test_sum_leading_axis_dtype_argument_and_out(rng):
    host = random_array(rng, (5000, 136), "int16")
    out = cupy.empty((136,), cupy.float64)
    assert ops.sum(cupy.asarray(host), axis=0, out=out) is out
    assert_same(out, np.sum(host, axis=0, dtype=np.float64))
    f = random_array(rng, (5000, 136), "float32")
    assert_same(ops.sum(cupy.asarray(f), axis=0, dtype="int64"), np.sum(f, axis=0, dtype=np.int64))


@pytest.mark.parametrize("dtype", FAST_DTYPES)
@pytest.mark.parametrize("shape", [(1000, 4096), (500, 4095), (300, 17)])
@pytest.mark.parametrize("offset", [0, 1])
def test_gather_rows_fast_path(dtype, shape, offset, rng):
    host = random_array(rng, (shape[0], shape[1] + offset), dtype)
    source = cupy.asarray(host)[:, offset:]
    index = rng.integers(-shape[0], shape[0], size=2000)
    assert_same(ops.gather(source, cupy.asarray(index)), np.take(host[:, offset:], index, axis=0))


@pytest.mark.parametrize("index_dtype", ["uint8", "int32", "uint64"])
def test_gather_slabs_of_inner_axes_and_out(index_dtype, rng):
    host = random_array(rng, (5, 200, 3, 40), "float32")
    index = rng.integers(0, 200, size=(2, 3)).astype(index_dtype)
    expected = np.take(host, index, axis=1)
    assert_same(ops.gather(cupy.asarray(host), cupy.asarray(index), axis=1), expected)
    out = cupy.empty(expected.shape[::-1], cupy.float32).T  # F-order out: the element loop
    assert ops.gather(cupy.asarray(host), cupy.asarray(index), axis=1, out=out) is out
    assert_same(out, expected)


def test_gather_fast_path_out_of_range_writes_zeros_and_raises(rng):
    host = random_array(rng, (6, 64), "float32")
    out = ops.gather(cupy.asarray(host), cupy.asarray(np.array([0, 9, 1])))
    with pytest.raises(IndexError, match="9"):
        ops.check_errors(out)
    got = cupy.asnumpy(out)
    np.testing.assert_array_equal(got[1], 0)
    np.testing.assert_array_equal(got[[0, 2]], host[[0, 1]])


@pytest.mark.parametrize("dtype", FAST_DTYPES)
@pytest.mark.parametrize("src_shape,out_shape", [((4096,), (1000, 4096)), ((4095,), (301, 4095)),
                                                 ((3000, 1), (3000, 100)), ((4, 1), (4, 200)),
                                                 ((2, 3, 1), (4, 2, 3, 64)), ((5, 1, 70), (5, 6, 70))])
def test_broadcast_to_runs_fast_path(dtype, src_shape, out_shape, rng):
    host = random_array(rng, src_shape, dtype)
    out = cupy.empty(out_shape, dtype)
    assert ops.broadcast_to(cupy.asarray(host), out) is out
    assert_same(out, np.broadcast_to(host, out_shape))


@pytest.mark.parametrize("dtype", ["int8", "float32", "float64"])
def test_broadcast_to_runs_misaligned_views(dtype, rng):
    host = random_array(rng, (4097,), dtype)
    src = cupy.asarray(host)[1:]  # one element off a 16-byte boundary
    big = cupy.zeros((200, 4097), dtype)
    out = big[:, 1:]
    assert ops.broadcast_to(src, out) is out
    got = cupy.asnumpy(big)
    np.testing.assert_array_equal(got[:, 1:], np.broadcast_to(host[1:], (200, 4096)))
    np.testing.assert_array_equal(got[:, 0], 0)  # nothing written outside the view


def test_torch_bfloat16_fast_paths(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    x = torch.from_numpy(random_array(rng, (3001, 136), "float32")).cuda().to(torch.bfloat16)
    # The references are summed on the host: torch's own CUDA reduction reads
    # memory it never initialised (5640 reports under compute-sanitizer
    # initcheck), which would hide gpufilt's in tools/sanitize_cuda.sh.
    host = x.cpu().double()

    def same(got, want):
        torch.testing.assert_close(got.cpu(), want.to(torch.bfloat16), rtol=0, atol=0)

    same(ops.sum(x), host.sum())
    same(ops.sum(x[1:].reshape(-1)[1:]), host[1:].reshape(-1)[1:].sum())
    same(ops.sum(x, axis=0), host.sum(0))
    same(ops.sum(x, axis=1), host.sum(1))
    index = torch.from_numpy(rng.integers(-3001, 3001, size=500)).cuda()
    assert torch.equal(ops.gather(x, index), x[index])
    out = torch.empty(50, 136, dtype=torch.bfloat16, device="cuda")
    assert ops.broadcast_to(x[7], out) is out
    assert torch.equal(out, x[7].expand(50, 136))
