"""gpufilt.ops.matmul on CUDA arrays (cuBLAS): cupy (float16/32/64) and
torch (float16, bfloat16, float32, float64) in every layout cuBLAS can
address, transposes, batches and broadcasting, out=, streams (explicit,
cupy's and torch's current), CUDA graph capture, bad input.

Every test is marked `cuda`. Results are judged on the host against the
float64 product of the stored values, by the GEMM error bound of the output
precision (16-bit types accumulate in float32 and round once), and against
the peer's own matmul (cupy.matmul / torch.matmul) by the same bound.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from gpufilt import _dispatch, ops
from gpufilt._ops_matmul import blas_info

from test_ops_matmul import assert_gemm_close, op, random_matrices

pytestmark = pytest.mark.cuda

cupy = pytest.importorskip("cupy")

CUPY_DTYPES = ["float16", "float32", "float64"]
LAYOUTS = ["C", "F", "sliced", "sliced_F"]


def on_device(x, layout, rng):
    """A cupy array with x's values laid out as `layout` (see
    test_ops_matmul.laid_out): built on the device, since cupy.asarray of a
    strided host array uploads a contiguous copy."""
    if layout == "C":
        return cupy.asarray(np.ascontiguousarray(x))
    if layout == "F":
        return cupy.swapaxes(cupy.asarray(np.ascontiguousarray(np.swapaxes(x, -1, -2))), -1, -2)
    if layout in ("sliced", "sliced_F"):
        base = x if layout == "sliced" else np.swapaxes(x, -1, -2)
        big = cupy.asarray(random_matrices(rng, base.shape[:-2] + (base.shape[-2] + 3, base.shape[-1] + 5),
                                           x.dtype))
        window = big[..., 1:1 + base.shape[-2], 2:2 + base.shape[-1]]
        window[...] = cupy.asarray(np.ascontiguousarray(base))
        return window if layout == "sliced" else cupy.swapaxes(window, -1, -2)
    if layout == "strided_batch":
        big = cupy.asarray(random_matrices(rng, (2 * x.shape[0],) + x.shape[1:], x.dtype))
        big[::2] = cupy.asarray(x)
        return big[::2]
    if layout == "reversed_batch":
        return cupy.asarray(np.ascontiguousarray(x[::-1]))[::-1]
    raise AssertionError(layout)


def check_cupy(got, peer, a, b, trans_a, trans_b):
    """got (and cupy.matmul's peer) within the GEMM bound of the exact product."""
    a_host, b_host = op(cupy.asnumpy(a), trans_a), op(cupy.asnumpy(b), trans_b)
    got_host = cupy.asnumpy(got)
    eps = float(np.finfo(got_host.dtype).eps)
    assert_gemm_close(got_host, a_host, b_host, eps)
    assert_gemm_close(cupy.asnumpy(peer), a_host, b_host, eps)


# ------------------------------------------------------------------- cupy


@pytest.mark.parametrize("dtype", CUPY_DTYPES)
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("layout_a", LAYOUTS)
@pytest.mark.parametrize("layout_b", ["C", "F", "sliced"])
def test_cupy_2d_every_layout_and_transpose(rng, dtype, trans_a, trans_b, layout_a, layout_b):
    m, k, n = 37, 21, 29
    a = on_device(random_matrices(rng, (k, m) if trans_a else (m, k), dtype), layout_a, rng)
    b = on_device(random_matrices(rng, (n, k) if trans_b else (k, n), dtype), layout_b, rng)
    a_before, b_before = cupy.asnumpy(a), cupy.asnumpy(b)
    got = ops.matmul(a, b, trans_a=trans_a, trans_b=trans_b)
    assert type(got) is cupy.ndarray and got.dtype == dtype and got.shape == (m, n)
    assert got.device.id == a.device.id
    check_cupy(got, cupy.matmul(op(a, trans_a), op(b, trans_b)), a, b, trans_a, trans_b)
    np.testing.assert_array_equal(cupy.asnumpy(a), a_before)
    np.testing.assert_array_equal(cupy.asnumpy(b), b_before)


@pytest.mark.parametrize("dtype", CUPY_DTYPES)
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("layout", LAYOUTS + ["strided_batch", "reversed_batch"])
def test_cupy_3d_stacks(rng, dtype, trans_a, trans_b, layout):
    batch, m, k, n = 5, 17, 12, 9
    a = on_device(random_matrices(rng, (batch, k, m) if trans_a else (batch, m, k), dtype), layout, rng)
    b = on_device(random_matrices(rng, (batch, n, k) if trans_b else (batch, k, n), dtype), "C", rng)
    got = ops.matmul(a, b, trans_a=trans_a, trans_b=trans_b)
    assert got.shape == (batch, m, n)
    check_cupy(got, cupy.matmul(op(a, trans_a), op(b, trans_b)), a, b, trans_a, trans_b)


@pytest.mark.parametrize("a_shape,b_shape", [((1, 8, 6), (4, 6, 5)), ((4, 8, 6), (1, 6, 5)),
                                             ((8, 6), (4, 6, 5)), ((4, 8, 6), (6, 5))])
def test_cupy_batch_broadcasting(rng, a_shape, b_shape):
    a = cupy.asarray(random_matrices(rng, a_shape, "float32"))
    b = cupy.asarray(random_matrices(rng, b_shape, "float32"))
    got = ops.matmul(a, b)
    assert got.shape == cupy.matmul(a, b).shape
    check_cupy(got, cupy.matmul(a, b), a, b, False, False)


def test_float32_runs_without_tf32(rng):
    # TF32 keeps 10 mantissa bits: over k = 512 its error reaches ~1e-2, full
    # float32 stays near 1e-4 (cupy's default, CUPY_TF32 unset).
    a = random_matrices(rng, (256, 512), "float32") / 3
    b = random_matrices(rng, (512, 256), "float32") / 3
    got = cupy.asnumpy(ops.matmul(cupy.asarray(a), cupy.asarray(b)))
    err = np.abs(got - a.astype(np.float64) @ b.astype(np.float64)).max()
    assert err < 1e-3, f"max error {err}: TF32 in use?"


@pytest.mark.parametrize("out_layout", LAYOUTS)
@pytest.mark.parametrize("batch", [None, 3])
def test_cupy_out_written_in_place_and_returned(rng, out_layout, batch):
    lead = () if batch is None else (batch,)
    a = cupy.asarray(random_matrices(rng, lead + (19, 8), "float32"))
    b = cupy.asarray(random_matrices(rng, lead + (8, 13), "float32"))
    out = on_device(np.full(lead + (19, 13), np.nan, np.float32), out_layout, rng)
    assert ops.matmul(a, b, out=out) is out
    assert_gemm_close(cupy.asnumpy(out), cupy.asnumpy(a), cupy.asnumpy(b))


def test_cupy_out_window_leaves_the_rest_untouched(rng):
    big = cupy.asarray(random_matrices(rng, (12, 14), "float64"))
    before = cupy.asnumpy(big)
    a = cupy.asarray(random_matrices(rng, (6, 4), "float64"))
    b = cupy.asarray(random_matrices(rng, (4, 5), "float64"))
    ops.matmul(a, b, out=big[3:9, 2:7])
    after = cupy.asnumpy(big)
    assert_gemm_close(after[3:9, 2:7], cupy.asnumpy(a), cupy.asnumpy(b))
    outside = np.ones(after.shape, bool)
    outside[3:9, 2:7] = False
    np.testing.assert_array_equal(after[outside], before[outside])


@pytest.mark.parametrize("batch", [None, 3])
def test_cupy_empty_inner_dimension_gives_zeros(batch):
    lead = () if batch is None else (batch,)
    a, b = cupy.ones(lead + (4, 0), cupy.float32), cupy.ones(lead + (0, 6), cupy.float32)
    out = cupy.full(lead + (4, 6), cupy.nan, cupy.float32)
    assert ops.matmul(a, b, out=out) is out
    np.testing.assert_array_equal(cupy.asnumpy(out), 0)


def test_cupy_empty_results():
    got = ops.matmul(cupy.ones((0, 3), cupy.float32), cupy.ones((3, 4), cupy.float32))
    assert type(got) is cupy.ndarray and got.shape == (0, 4)
    got = ops.matmul(cupy.ones((0, 2, 3), cupy.float64), cupy.ones((3, 4), cupy.float64))
    assert got.shape == (0, 2, 4)


def test_cublas_library_is_named():
    ops.matmul(cupy.ones((2, 2), cupy.float32), cupy.ones((2, 2), cupy.float32))
    info = blas_info(_dispatch.cuda_module())
    assert os.path.basename(info["library"]).startswith("libcublas.so.13"), info


# ------------------------------------------------------------------ torch


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("batch", [None, 3])
def test_torch_cuda_tensors(rng, dtype, trans_a, trans_b, batch):
    torch = pytest.importorskip("torch")
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")  # numpy's name for bfloat16 (gpufilt's Operand)
    tdtype = getattr(torch, dtype)
    lead = () if batch is None else (batch,)
    m, k, n = 33, 24, 18
    a = torch.from_numpy(random_matrices(rng, lead + ((k, m) if trans_a else (m, k)), "float32")).to("cuda", tdtype)
    b = torch.from_numpy(random_matrices(rng, lead + ((n, k) if trans_b else (k, n)), "float32")).to("cuda", tdtype)
    if trans_b:
        b = b.transpose(-1, -2).contiguous().transpose(-1, -2)  # a Fortran-ordered operand too
    got = ops.matmul(a, b, trans_a=trans_a, trans_b=trans_b)
    assert isinstance(got, torch.Tensor) and got.dtype == tdtype and got.device == a.device
    peer = torch.matmul(a.transpose(-1, -2) if trans_a else a, b.transpose(-1, -2) if trans_b else b)
    torch.cuda.current_stream().synchronize()
    a_op, b_op = op(host(a), trans_a), op(host(b), trans_b)
    eps = float(torch.finfo(tdtype).eps)
    assert_gemm_close(host(got), a_op, b_op, eps)
    assert_gemm_close(host(peer), a_op, b_op, eps)


def host(tensor):
    """A torch tensor's values as float64 numpy (exact for every dtype here)."""
    return tensor.double().cpu().numpy()


def test_torch_out_and_requires_grad(rng):
    torch = pytest.importorskip("torch")
    a = torch.randn(7, 5, device="cuda", requires_grad=True)
    b = torch.randn(5, 3, device="cuda")
    out = torch.empty(7, 3, device="cuda")
    with pytest.raises(ValueError, match="requires grad"):
        ops.matmul(a, b, out=out)
    with torch.no_grad():
        assert ops.matmul(a, b, out=out) is out
        torch.testing.assert_close(out, a @ b)


def test_torch_current_stream(rng):
    torch = pytest.importorskip("torch")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a = torch.randn(512, 256, device="cuda")
        b = torch.randn(256, 384, device="cuda")
        got = ops.matmul(a, b)  # enqueued on s, after a and b are written there
    s.synchronize()
    assert_gemm_close(host(got).astype(np.float32), host(a), host(b))


# ---------------------------------------------------------------- streams


def test_cupy_explicit_stream(rng):
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        a = cupy.asarray(random_matrices(rng, (300, 200), "float32"))
        b = cupy.asarray(random_matrices(rng, (200, 100), "float32"))
        out = cupy.zeros((300, 100), cupy.float32)
    ops.matmul(a, b, out=out, stream=s)
    s.synchronize()
    assert_gemm_close(cupy.asnumpy(out), cupy.asnumpy(a), cupy.asnumpy(b))


def test_cupy_current_stream_orders_after_producers(rng):
    s = cupy.cuda.Stream(non_blocking=True)
    a_host = random_matrices(rng, (256, 128), "float64")
    with s:
        a = cupy.asarray(a_host)
        b = cupy.asarray(random_matrices(rng, (128, 64), "float64"))
        a *= 2  # pending on s when matmul is enqueued
        got = ops.matmul(a, b)
    s.synchronize()
    assert_gemm_close(cupy.asnumpy(got), 2 * a_host, cupy.asnumpy(b))


# ----------------------------------------------------------- graph capture


@pytest.mark.parametrize("batch", [None, 4])
def test_cupy_graph_capture_replays_on_new_data(rng, batch):
    lead = () if batch is None else (batch,)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        a = cupy.asarray(random_matrices(rng, lead + (48, 40), "float32"))
        b = cupy.asarray(random_matrices(rng, (40, 24), "float32"))  # broadcast over the batch
        out = cupy.zeros(lead + (48, 24), cupy.float32)
        ops.matmul(a, b, out=out)  # first call on the device: creates the cuBLAS handle
    s.synchronize()
    with s:
        s.begin_capture()
        try:
            ops.matmul(a, b, out=out)
        finally:
            graph = s.end_capture()
    new_a = random_matrices(rng, a.shape, "float32")
    with s:
        a.set(new_a, stream=s)
        out.fill(np.nan)
    graph.launch(stream=s)
    s.synchronize()
    assert_gemm_close(cupy.asnumpy(out), new_a, cupy.asnumpy(b))
    newer_a = random_matrices(rng, a.shape, "float32")
    a.set(newer_a, stream=s)
    graph.launch(stream=s)
    s.synchronize()
    assert_gemm_close(cupy.asnumpy(out), newer_a, cupy.asnumpy(b))


# -------------------------------------------------------------- bad input


def test_cpu_and_cuda_operands_raise_value_error(rng):
    host = random_matrices(rng, (4, 3), "float32")
    dev = cupy.asarray(random_matrices(rng, (3, 2), "float32"))
    with pytest.raises(ValueError, match="one device"):
        ops.matmul(host, dev)
    with pytest.raises(ValueError, match="one device"):
        ops.matmul(cupy.asarray(host), random_matrices(rng, (3, 2), "float32"))
    with pytest.raises(ValueError, match="one device"):
        ops.matmul(cupy.asarray(host), dev, out=np.zeros((4, 2), np.float32))


def test_operands_on_two_devices_raise_value_error(rng):
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two CUDA devices")
    with cupy.cuda.Device(0):
        a = cupy.ones((4, 3), cupy.float32)
    with cupy.cuda.Device(1):
        b = cupy.ones((3, 2), cupy.float32)
    with pytest.raises(ValueError, match="one device"):
        ops.matmul(a, b)


def test_cuda_dtype_errors(rng):
    a = cupy.ones((4, 3), cupy.float16)
    with pytest.raises(TypeError, match="one dtype"):
        ops.matmul(a, cupy.ones((3, 2), cupy.float32))
    with pytest.raises(TypeError, match="float16, bfloat16, float32 and float64"):
        ops.matmul(cupy.ones((4, 3), cupy.int32), cupy.ones((3, 2), cupy.int32))
    with pytest.raises(TypeError, match="out has dtype"):
        ops.matmul(a, cupy.ones((3, 2), cupy.float16), out=cupy.zeros((4, 2), cupy.float32))


def test_cuda_shape_and_layout_errors_leave_data_untouched(rng):
    a = cupy.asarray(random_matrices(rng, (4, 6), "float32"))
    b = cupy.asarray(random_matrices(rng, (5, 2), "float32"))
    before = cupy.asnumpy(a), cupy.asnumpy(b)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        ops.matmul(a, b)
    with pytest.raises(ValueError, match="contiguous copy"):
        ops.matmul(a[:, ::2], cupy.asarray(random_matrices(rng, (3, 2), "float32")))
    with pytest.raises(ValueError, match="shares memory"):
        ops.matmul(a[:, :4], a[:, 2:6], out=a[:, :4])
    np.testing.assert_array_equal(cupy.asnumpy(a), before[0])
    np.testing.assert_array_equal(cupy.asnumpy(b), before[1])


def test_torch_bfloat16_with_float16_raises_type_error():
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    a = torch.ones(4, 3, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="one dtype"):
        ops.matmul(a, torch.ones(3, 2, device="cuda", dtype=torch.float16))
