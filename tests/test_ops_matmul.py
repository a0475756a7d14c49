"""gpufilt.ops.matmul on the CPU: numpy.matmul is the oracle.

Every layout BLAS can address (C, Fortran, transposed views, slices whose
leading dimension exceeds the extent, strided and reversed batches) under
every trans_a / trans_b, batch broadcasting, empty dimensions, out=, other
libraries, and bad input (which must leave every array untouched).

Accuracy: the float64 product of the stored values is exact enough to judge
by the standard GEMM error bound, |got - exact| <= c k u (|op a| @ |op b|);
the plain C-ordered product is also compared bit for bit with numpy's own
(both call the same BLAS).
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from gpufilt import _dispatch, ops
from gpufilt._ops_matmul import blas_info

CPU_DTYPES = ["float32", "float64"]
LAYOUTS = ["C", "F", "sliced", "sliced_F"]


def op(x, trans):
    """x with its last two axes swapped when `trans` (a view)."""
    return np.swapaxes(x, -1, -2) if trans else x


def random_matrices(rng, shape, dtype):
    return (rng.standard_normal(shape) * 3).astype(dtype)


def laid_out(x, layout, rng):
    """x's values in `layout` (each matrix of a stack laid out alike):
    C, F (column-major matrices), sliced (a window of a bigger C array, so the
    leading dimension exceeds the extent), sliced_F (likewise, column-major),
    strided_batch (every other matrix of a bigger stack), reversed_batch."""
    if layout == "C":
        return np.ascontiguousarray(x)
    if layout == "F":
        return np.swapaxes(np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2)
    if layout in ("sliced", "sliced_F"):
        base = x if layout == "sliced" else np.swapaxes(x, -1, -2)
        big = random_matrices(rng, base.shape[:-2] + (base.shape[-2] + 3, base.shape[-1] + 5), x.dtype)
        window = big[..., 1:1 + base.shape[-2], 2:2 + base.shape[-1]]
        window[...] = base
        return window if layout == "sliced" else np.swapaxes(window, -1, -2)
    if layout == "strided_batch":
        big = random_matrices(rng, (2 * x.shape[0],) + x.shape[1:], x.dtype)
        big[::2] = x
        return big[::2]
    if layout == "reversed_batch":
        return np.ascontiguousarray(x[::-1])[::-1]
    raise AssertionError(layout)


def assert_gemm_close(got, a_op, b_op, out_eps=None):
    """got == a_op @ b_op within the GEMM error bound of got's precision
    (accumulation and output rounding at `out_eps`, default got's epsilon)."""
    got = np.asarray(got)
    a64, b64 = np.asarray(a_op, np.float64), np.asarray(b_op, np.float64)
    exact = np.matmul(a64, b64)
    assert got.shape == exact.shape
    eps = np.finfo(got.dtype).eps if out_eps is None else out_eps
    k = a64.shape[-1]
    bound = np.matmul(np.abs(a64), np.abs(b64)) * (2 * (k + 2) * eps) + np.finfo(np.float64).tiny
    err = np.abs(got.astype(np.float64) - exact)
    assert (err <= bound).all(), f"max error {err.max()} exceeds the GEMM bound (k={k})"


# ------------------------------------------------------------- correctness


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("shape", [(64, 48, 80), (7, 129, 3), (300, 200, 100)])
def test_c_ordered_product_is_numpys_bit_for_bit(rng, dtype, shape):
    m, k, n = shape
    a, b = random_matrices(rng, (m, k), dtype), random_matrices(rng, (k, n), dtype)
    got = ops.matmul(a, b)
    assert type(got) is np.ndarray and got.dtype == dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, np.matmul(a, b))


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("layout_a", LAYOUTS)
@pytest.mark.parametrize("layout_b", LAYOUTS)
def test_2d_every_layout_and_transpose(rng, dtype, trans_a, trans_b, layout_a, layout_b):
    m, k, n = 13, 9, 11
    a = laid_out(random_matrices(rng, (k, m) if trans_a else (m, k), dtype), layout_a, rng)
    b = laid_out(random_matrices(rng, (n, k) if trans_b else (k, n), dtype), layout_b, rng)
    a_before, b_before = a.copy(), b.copy()
    got = ops.matmul(a, b, trans_a=trans_a, trans_b=trans_b)
    assert got.shape == (m, n) and got.dtype == dtype
    assert_gemm_close(got, op(a, trans_a), op(b, trans_b))
    np.testing.assert_allclose(got, np.matmul(op(a, trans_a), op(b, trans_b)),
                               rtol=1e-4 if dtype == "float32" else 1e-12, atol=1e-3 if dtype == "float32" else 1e-11)
    np.testing.assert_array_equal(a, a_before)
    np.testing.assert_array_equal(b, b_before)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("layout", LAYOUTS + ["strided_batch", "reversed_batch"])
def test_3d_stacks(rng, dtype, trans_a, trans_b, layout):
    batch, m, k, n = 4, 6, 5, 7
    a = laid_out(random_matrices(rng, (batch, k, m) if trans_a else (batch, m, k), dtype), layout, rng)
    b = laid_out(random_matrices(rng, (batch, n, k) if trans_b else (batch, k, n), dtype), "C", rng)
    got = ops.matmul(a, b, trans_a=trans_a, trans_b=trans_b)
    assert got.shape == (batch, m, n)
    assert_gemm_close(got, op(a, trans_a), op(b, trans_b))
    # and the other way round: the odd layout on b
    got = ops.matmul(b, a, trans_a=not trans_b, trans_b=not trans_a)
    assert_gemm_close(got, op(b, not trans_b), op(a, not trans_a))


@pytest.mark.parametrize("a_shape,b_shape,want", [
    ((1, 4, 3), (5, 3, 2), (5, 4, 2)),
    ((5, 4, 3), (1, 3, 2), (5, 4, 2)),
    ((4, 3), (5, 3, 2), (5, 4, 2)),
    ((5, 4, 3), (3, 2), (5, 4, 2)),
    ((1, 4, 3), (1, 3, 2), (1, 4, 2)),
])
def test_a_batch_of_one_or_a_matrix_broadcasts(rng, a_shape, b_shape, want):
    a, b = random_matrices(rng, a_shape, "float64"), random_matrices(rng, b_shape, "float64")
    got = ops.matmul(a, b)
    assert got.shape == want == np.matmul(a, b).shape
    assert_gemm_close(got, a, b)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 8, 1), (8, 1, 8), (1, 5, 9), (9, 5, 1)])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_vector_shaped_matrices(rng, m, k, n, trans_a, trans_b):
    a = random_matrices(rng, (k, m) if trans_a else (m, k), "float32")
    b = random_matrices(rng, (n, k) if trans_b else (k, n), "float32")
    assert_gemm_close(ops.matmul(a, b, trans_a, trans_b), op(a, trans_a), op(b, trans_b))


def test_extent_one_axes_accept_any_stride(rng):
    big = random_matrices(rng, (6, 10), "float32")
    a = big[2:3, ::3]    # one row, column stride 3: a row vector BLAS reads as a column
    b = big[:4, 1:2]     # one column of a C array
    assert_gemm_close(ops.matmul(a, b), a, b)


# -------------------------------------------------------------------- empty


@pytest.mark.parametrize("a_shape,b_shape", [((0, 3), (3, 4)), ((3, 4), (4, 0)), ((0, 3, 4), (0, 4, 2)),
                                             ((2, 0, 3), (3, 5)), ((0, 3, 4), (4, 2))])
def test_empty_results(a_shape, b_shape, rng):
    a, b = random_matrices(rng, a_shape, "float32"), random_matrices(rng, b_shape, "float32")
    got = ops.matmul(a, b)
    assert got.shape == np.matmul(a, b).shape and got.size == 0


@pytest.mark.parametrize("batch", [None, 3])
def test_empty_inner_dimension_gives_zeros(batch):
    lead = () if batch is None else (batch,)
    a, b = np.ones(lead + (4, 0), np.float64), np.ones(lead + (0, 5), np.float64)
    out = np.full(lead + (4, 5), np.nan)
    assert ops.matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out, np.zeros(lead + (4, 5)))
    np.testing.assert_array_equal(ops.matmul(a, b), np.zeros(lead + (4, 5)))


def test_empty_inner_dimension_into_a_window_leaves_the_margin(rng):
    big = random_matrices(rng, (6, 9), "float32")
    before = big.copy()
    window = big[1:5, 2:7]
    ops.matmul(np.ones((4, 0), np.float32), np.ones((0, 5), np.float32), out=window)
    np.testing.assert_array_equal(window, 0)
    outside = np.ones(big.shape, bool)
    outside[1:5, 2:7] = False
    np.testing.assert_array_equal(big[outside], before[outside])


# ---------------------------------------------------------------------- out=


@pytest.mark.parametrize("out_layout", ["C", "F", "sliced", "sliced_F"])
@pytest.mark.parametrize("batch", [None, 3])
def test_out_is_written_in_place_and_returned(rng, out_layout, batch):
    lead = () if batch is None else (batch,)
    a, b = random_matrices(rng, lead + (7, 4), "float32"), random_matrices(rng, lead + (4, 6), "float32")
    out = laid_out(np.full(lead + (7, 6), np.nan, np.float32), out_layout, rng)
    assert ops.matmul(a, b, out=out) is out
    assert_gemm_close(out, a, b)


def test_out_window_leaves_the_rest_of_its_base_untouched(rng):
    big = random_matrices(rng, (10, 12), "float64")
    before = big.copy()
    a, b = random_matrices(rng, (5, 3), "float64"), random_matrices(rng, (3, 4), "float64")
    ops.matmul(a, b, out=big[2:7, 3:7])
    assert_gemm_close(big[2:7, 3:7], a, b)
    outside = np.ones(big.shape, bool)
    outside[2:7, 3:7] = False
    np.testing.assert_array_equal(big[outside], before[outside])


# --------------------------------------------------------- other libraries


def test_torch_cpu_tensors_give_a_torch_tensor(rng):
    torch = pytest.importorskip("torch")
    a, b = random_matrices(rng, (2, 5, 3), "float32"), random_matrices(rng, (2, 3, 4), "float32")
    ta = torch.from_numpy(a).requires_grad_(True)
    with pytest.raises(ValueError, match="requires grad.*gpufilt.torch"):
        ops.matmul(ta, torch.from_numpy(b))  # no autograd history: refused while grad mode is on
    with torch.no_grad():
        got = ops.matmul(ta, torch.from_numpy(b))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32 and got.device.type == "cpu"
    assert_gemm_close(got.numpy(), a, b)
    out = torch.empty(2, 4, 5)
    assert ops.matmul(torch.from_numpy(b), torch.from_numpy(a), True, True, out=out) is out
    assert_gemm_close(out.numpy(), np.swapaxes(b, 1, 2), np.swapaxes(a, 1, 2))


def test_plain_buffers_give_numpy(rng):
    a, b = random_matrices(rng, (3, 4), "float64"), random_matrices(rng, (4, 2), "float64")
    got = ops.matmul(memoryview(a), memoryview(b))
    assert type(got) is np.ndarray
    assert_gemm_close(got, a, b)


def test_concurrent_calls_from_threads(rng):
    pairs = [(random_matrices(rng, (40, 30), "float32"), random_matrices(rng, (30, 20), "float32"))
             for _ in range(8)]
    results = [None] * len(pairs)

    def work(i):
        results[i] = ops.matmul(*pairs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(pairs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (a, b), got in zip(pairs, results):
        np.testing.assert_array_equal(got, np.matmul(a, b))


def test_blas_info_names_the_library_in_use():
    ops.matmul(np.ones((2, 2)), np.ones((2, 2)))
    info = blas_info(_dispatch._core)
    assert info["int_bits"] in (32, 64)
    assert "gemm" in info["gemm"]
    assert info["library"]


# ---------------------------------------------------------------- bad input


def assert_untouched(arrays, call, error, match):
    """`call` raises `error` matching `match` and changes none of `arrays`."""
    before = [np.array(x, copy=True) for x in arrays]
    with pytest.raises(error, match=match):
        call()
    for x, was in zip(arrays, before):
        np.testing.assert_array_equal(x, was)


def test_inner_dimensions_that_differ_name_a_and_b(rng):
    a, b = random_matrices(rng, (3, 4), "float32"), random_matrices(rng, (5, 2), "float32")
    assert_untouched([a, b], lambda: ops.matmul(a, b), ValueError, r"a has shape \(3, 4\).*b has shape \(5, 2\)")
    out = np.zeros((3, 2), np.float32)
    assert_untouched([a, b, out], lambda: ops.matmul(a, b, out=out), ValueError, "inner dimensions differ")
    assert_untouched([a, b], lambda: ops.matmul(a, b, trans_a=True), ValueError, "transposed")


@pytest.mark.parametrize("a_shape,b_shape", [((4,), (4, 2)), ((3, 4), (4,)), ((2, 2, 3, 4), (4, 2)), ((), (1, 1))])
def test_other_ranks_raise_value_error(a_shape, b_shape):
    a, b = np.ones(a_shape, np.float32), np.ones(b_shape, np.float32)
    with pytest.raises(ValueError, match="2-D matrices or 3-D stacks"):
        ops.matmul(a, b)


def test_batches_that_do_not_broadcast(rng):
    a, b = random_matrices(rng, (3, 4, 5), "float64"), random_matrices(rng, (2, 5, 6), "float64")
    assert_untouched([a, b], lambda: ops.matmul(a, b), ValueError, "batch sizes differ")


@pytest.mark.parametrize("da,db", [("float32", "float64"), ("float64", "float32")])
def test_mixed_dtypes_raise_type_error(rng, da, db):
    a, b = random_matrices(rng, (3, 4), da), random_matrices(rng, (4, 2), db)
    assert_untouched([a, b], lambda: ops.matmul(a, b), TypeError, "one dtype")


@pytest.mark.parametrize("dtype", ["float16", "int32", "int64", "complex64", "bool"])
def test_unsupported_dtypes_raise_type_error(dtype):
    a, b = np.ones((3, 4), dtype), np.ones((4, 2), dtype)
    with pytest.raises(TypeError, match="float32 and float64"):
        ops.matmul(a, b)


def test_torch_bfloat16_on_the_cpu_raises_type_error():
    torch = pytest.importorskip("torch")
    a = torch.ones(3, 4, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="bfloat16"):
        ops.matmul(a, a.T)


def test_out_of_the_wrong_shape_names_out(rng):
    a, b = random_matrices(rng, (3, 4), "float32"), random_matrices(rng, (4, 2), "float32")
    out = np.full((2, 3), 7, np.float32)
    assert_untouched([a, b, out], lambda: ops.matmul(a, b, out=out), ValueError, r"out has shape \(2, 3\)")
    out3 = np.full((1, 3, 2), 7, np.float32)
    assert_untouched([a, b, out3], lambda: ops.matmul(a, b, out=out3), ValueError, "out has shape")


def test_out_of_the_wrong_dtype_names_out(rng):
    a, b = random_matrices(rng, (3, 4), "float32"), random_matrices(rng, (4, 2), "float32")
    out = np.full((3, 2), 7, np.float64)
    assert_untouched([a, b, out], lambda: ops.matmul(a, b, out=out), TypeError, "out has dtype float64")


def test_out_overlapping_an_operand_raises(rng):
    a, b = random_matrices(rng, (4, 4), "float64"), random_matrices(rng, (4, 4), "float64")
    assert_untouched([a, b], lambda: ops.matmul(a, b, out=a), ValueError, "shares memory")
    assert_untouched([a, b], lambda: ops.matmul(a, b, out=b.T), ValueError, "shares memory")
    big = random_matrices(rng, (8, 4), "float64")
    assert_untouched([big], lambda: ops.matmul(big[:4], b, out=big[2:6]), ValueError, "shares memory")


def test_read_only_out_raises(rng):
    a, b = random_matrices(rng, (3, 4), "float32"), random_matrices(rng, (4, 2), "float32")
    out = np.zeros((3, 2), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ops.matmul(a, b, out=out)


@pytest.mark.parametrize("make", [
    lambda x: x[:, ::2],                               # no unit stride in either axis
    lambda x: x[::2, ::2],
    lambda x: x[::-1],                                 # negative row stride
    lambda x: np.broadcast_to(x[:1], x.shape),         # zero row stride
    lambda x: np.lib.stride_tricks.as_strided(x, (x.shape[0], 6), (x.strides[1], x.strides[1])),  # rows overlap
], ids=["cols_strided", "both_strided", "reversed_rows", "broadcast_rows", "overlapping_rows"])
def test_strides_blas_cannot_address_raise_without_copying(rng, make):
    x = random_matrices(rng, (6, 12), "float32")
    a = make(x)
    b = random_matrices(rng, (a.shape[1], 3), "float32")
    assert_untouched([x, b], lambda: ops.matmul(a, b), ValueError, "contiguous copy")
    assert_untouched([x, b], lambda: ops.matmul(b.T, a.T), ValueError, "contiguous copy")


def test_fortran_ordered_3d_stack_is_not_addressable(rng):
    a = np.asfortranarray(random_matrices(rng, (3, 4, 5), "float64"))  # no unit stride in its last two axes
    b = random_matrices(rng, (3, 5, 2), "float64")
    assert_untouched([a, b], lambda: ops.matmul(a, b), ValueError, "unit stride")


def test_out_with_overlapping_matrices_raises(rng):
    a, b = random_matrices(rng, (3, 2, 2), "float64"), random_matrices(rng, (3, 2, 2), "float64")
    base = np.zeros(8)
    out = np.lib.stride_tricks.as_strided(base, (3, 2, 2), (8, 16, 8))  # matrices one element apart
    with pytest.raises(ValueError, match="overlap"):
        ops.matmul(a, b, out=out)
    np.testing.assert_array_equal(base, 0)


def test_not_an_array_raises_type_error():
    with pytest.raises(TypeError, match="a of type"):
        ops.matmul(object(), np.ones((2, 2)))
