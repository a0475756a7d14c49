"""gpufilt.ops neural-network kernels on CUDA: cupy arrays and torch CUDA
tensors (float16, bfloat16, float32, float64), every kernel variant (16-byte
vectorised and strided pointwise, 1/8/32/256 threads a row, rows
held in registers by a warp or a block), out= and in
place, streams, CUDA graph capture, and out-of-range labels (NaN results,
IndexError at the next call, never an illegal address).

Every test is marked `cuda` (skipped without a usable device). numpy in
float64 on the host is the oracle (torch's own CUDA kernels for bfloat16);
results come back to the host in the test only.
"""
from __future__ import annotations

import numpy as np
import pytest

from gpufilt import _dispatch, _range_errors, ops

from _helpers import FLOAT_DTYPES, assert_matches, random_array
from test_ops_nn import (random_labels, random_probabilities, ref_cross_entropy, ref_cross_entropy_grad,
                         ref_log_softmax, ref_relu, ref_sigmoid, ref_softmax)

pytestmark = pytest.mark.cuda

cupy = pytest.importorskip("cupy")


def device(host):
    return cupy.asarray(host)


def host(x):
    return cupy.asnumpy(x)


@pytest.fixture(autouse=True)
def no_stale_label_error():
    """Each test starts with no out-of-range index recorded."""
    cupy.cuda.Device().synchronize()
    try:
        _range_errors.raise_recorded(_dispatch._cuda)
    except IndexError:
        pass


# --------------------------------------------------------------- pointwise


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", [(1_000_003,), (37, 129), (3, 4, 5), (), (0, 7), (1,)])
def test_cupy_pointwise_match_numpy(dtype, shape, rng):
    x_h = random_array(rng, shape, dtype)
    g_h = random_array(rng, shape, dtype)
    x, g = device(x_h), device(g_h)
    assert_matches(host(ops.relu(x)), ref_relu(x_h), dtype)
    assert_matches(host(ops.sigmoid(x)), ref_sigmoid(x_h), dtype)
    assert_matches(host(ops.relu_grad(x, g)), np.where(x_h > 0, g_h, 0), dtype)
    y_h = host(ops.sigmoid(x))
    expected = g_h.astype(np.float64) * (1 - y_h.astype(np.float64)) * y_h.astype(np.float64)
    assert_matches(host(ops.sigmoid_grad(device(y_h), g)), expected, dtype)
    assert isinstance(ops.relu(x), cupy.ndarray) and ops.relu(x).dtype == dtype


@pytest.mark.parametrize("view", ["offset", "strided", "negative", "transposed"])
def test_cupy_pointwise_any_layout_and_alignment(view, rng):
    base_h = random_array(rng, (65, 130), np.float32)
    base = device(base_h)
    pick = {"offset": lambda a: a[:, 1:],        # rows not 16-byte aligned
            "strided": lambda a: a[::2, ::3],
            "negative": lambda a: a[::-1, ::-1],
            "transposed": lambda a: a.T}[view]
    x, x_h = pick(base), pick(base_h)
    assert_matches(host(ops.relu(x)), ref_relu(x_h), np.float32)
    assert_matches(host(ops.sigmoid(x)), ref_sigmoid(x_h), np.float32)
    g = pick(device(random_array(rng, base_h.shape, np.float32)))
    assert_matches(host(ops.relu_grad(x, g)), np.where(x_h > 0, host(g), 0), np.float32)


def at_odd_address(x_h):
    """x_h's values in a cupy array one byte past an aligned start (every
    element read and written byte by byte), and the bytes holding it."""
    raw = cupy.zeros(x_h.nbytes + 1, np.uint8)
    raw[1:] = device(np.ascontiguousarray(x_h).view(np.uint8).ravel())
    return cupy.ndarray(x_h.shape, x_h.dtype, memptr=raw.data + 1), raw


def values_at_odd_address(raw, like):
    return host(raw[1:]).view(like.dtype).reshape(like.shape)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_cupy_pointwise_and_softmax_at_odd_addresses(dtype, rng):
    """Element stores byte by byte: a float16 result's low byte must not be
    lost (CUDA 13's ptxas turns a byte store of a 16-bit cvt result into a
    float-to-integer conversion: -3.72 stored as -3.5)."""
    x_h = random_array(rng, (9, 37), dtype) * 4
    x, _ = at_odd_address(x_h)
    for op, expected in [(ops.relu, ref_relu(x_h)), (ops.sigmoid, ref_sigmoid(x_h)),
                         (ops.softmax, ref_softmax(x_h, -1))]:
        out, raw_out = at_odd_address(np.zeros_like(x_h))
        assert op(x, out=out) is out
        assert_matches(values_at_odd_address(raw_out, x_h), expected, dtype)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_cupy_relu_in_place_large(dtype, rng):
    x_h = random_array(rng, (2**20 + 5,), dtype)
    x = device(x_h)
    assert ops.relu(x, out=x) is x
    np.testing.assert_array_equal(host(x), ref_relu(x_h))


# ----------------------------------------------------------------- softmax


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape,axis", [
    ((1000, 10), -1),     # 8 threads a row, vectorised
    ((300, 500), 1),      # a warp a row
    ((7, 5000), -1),      # a block a row
    ((300, 5000), 0),     # strided rows, many: a thread a row
    ((3, 50, 9), 1),      # strided rows, few
    ((), -1), ((0, 4), 1), ((4, 0), 1),
])
@pytest.mark.parametrize("log", [False, True])
def test_cupy_softmax_match_numpy(dtype, shape, axis, log, rng):
    x_h = random_array(rng, shape, dtype)
    got = host((ops.log_softmax if log else ops.softmax)(device(x_h), axis))
    expected = (ref_log_softmax if log else ref_softmax)(x_h, axis) if x_h.size else x_h
    assert got.dtype == dtype
    assert_matches(got, expected, dtype)


@pytest.mark.parametrize("view", ["offset", "negative", "F"])
def test_cupy_softmax_unaligned_and_strided_rows(view, rng):
    base_h = random_array(rng, (40, 131), np.float32)
    pick = {"offset": lambda a: a[:, 3:], "negative": lambda a: a[:, ::-1],
            "F": lambda a: a.T.copy().T}[view]
    x = pick(device(base_h))
    x_h = pick(base_h)
    assert_matches(host(ops.softmax(x)), ref_softmax(x_h, -1), np.float32)
    out = cupy.full((x.shape[1], x.shape[0]), np.nan, np.float32).T
    assert ops.log_softmax(x, out=out) is out
    assert_matches(host(out), ref_log_softmax(x_h, -1), np.float32)


def test_cupy_softmax_huge_logits_and_in_place():
    x_h = np.array([[1e4, -1e4, 0.0], [1e4, 1e4 - 1, 1e4 - 2], [-1e4, -1e4, -1e4 + 3]], np.float32)
    x = device(x_h)
    assert ops.softmax(x, out=x) is x
    assert_matches(host(x), ref_softmax(x_h, -1), np.float32)


# ----------------------------------------------------------- cross-entropy


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", [(256, 10), (64, 1000), (4, 5000), (100_000, 3), (1, 1)])
@pytest.mark.parametrize("kind", ["index", "probability"])
def test_cupy_cross_entropy_match_numpy(dtype, shape, kind, rng):
    logits_h = random_array(rng, shape, dtype)
    labels_h = random_labels(rng, shape) if kind == "index" else random_probabilities(rng, shape, dtype)
    logits, labels = device(logits_h), device(labels_h)
    loss = ops.softmax_cross_entropy(logits, labels)
    assert isinstance(loss, cupy.ndarray) and loss.shape == () and loss.dtype == dtype
    assert_matches(host(loss), ref_cross_entropy(logits_h, labels_h), dtype)
    grad = ops.softmax_cross_entropy_grad(logits, labels)
    assert_matches(host(grad), ref_cross_entropy_grad(logits_h, labels_h), dtype, scale=1.0 / shape[0])


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("kind", ["index", "probability"])
def test_cupy_cross_entropy_class_axis(axis, kind, rng):
    shape = (40, 30, 20)
    logits_h = random_array(rng, shape, np.float64)
    labels_h = (random_labels(rng, shape, axis) if kind == "index"
                else random_probabilities(rng, shape, np.float64, axis))
    logits, labels = device(logits_h), device(labels_h)
    assert_matches(host(ops.softmax_cross_entropy(logits, labels, axis)),
                   ref_cross_entropy(logits_h, labels_h, axis))
    assert_matches(host(ops.softmax_cross_entropy_grad(logits, labels, 2.0, axis=axis)),
                   ref_cross_entropy_grad(logits_h, labels_h, 2.0, axis), np.float64)


def test_cupy_cross_entropy_huge_logits_and_deterministic():
    logits_h = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, 1e4], [1e4, 1e4, 1e4], [-1e4, -1e4, -1e4]],
                        np.float32)
    labels_h = np.array([1, 2, 0, 2])
    logits, labels = device(logits_h), device(labels_h)
    first = host(ops.softmax_cross_entropy(logits, labels))
    assert_matches(first, ref_cross_entropy(logits_h, labels_h), np.float32)
    big_h = random_array(np.random.default_rng(1), (50_000, 37), np.float32) * 100
    big_labels = device(random_labels(np.random.default_rng(2), big_h.shape))
    big = device(big_h)
    a = host(ops.softmax_cross_entropy(big, big_labels))
    b = host(ops.softmax_cross_entropy(big, big_labels))
    assert a.tobytes() == b.tobytes()  # a fixed reduction order: the same bits


def test_cupy_cross_entropy_grad_scale_on_device_and_out(rng):
    logits_h = random_array(rng, (33, 17), np.float32)
    labels_h = random_labels(rng, logits_h.shape).astype(np.int32)
    logits, labels = device(logits_h), device(labels_h)
    expected = ref_cross_entropy_grad(logits_h, labels_h, 0.25)
    out = cupy.empty_like(logits)
    assert ops.softmax_cross_entropy_grad(logits, labels, cupy.asarray(0.25, np.float32), out=out) is out
    assert_matches(host(out), expected, np.float32, scale=0.01)
    loss = cupy.zeros((), np.float32)
    assert ops.softmax_cross_entropy(logits, labels, out=loss) is loss
    assert ops.softmax_cross_entropy_grad(logits, labels, 0.25, out=logits) is logits  # in place
    assert_matches(host(logits), expected, np.float32, scale=0.01)


def test_cupy_cross_entropy_empty_batch_is_nan():
    loss = ops.softmax_cross_entropy(cupy.zeros((0, 4), np.float32), cupy.zeros((0,), np.int64))
    assert np.isnan(host(loss))


# ------------------------------------------------- rows held in registers

# Row lengths at and around each held kernel's capacity (a warp, then the
# block, times 1, 2, 4, 8 chunks of 16 bytes a thread: float32 128 to 8192,
# float16 256 to 8192, float64 64 to 4096) and just past the last one (back
# to row_kernel); 64 and below stay on row_kernel's 8 threads a row.
HELD_LENGTHS = [64, 65, 127, 128, 129, 256, 257, 512, 513, 1023, 1024, 1025, 2048, 2049,
                4095, 4096, 4097, 8192, 8193]


def in_layout(layout, host_array):
    """2-d `host_array` on the device: 'C' (rows 16-byte aligned only when
    the length allows: otherwise element loads); 'padded' (every row
    16-byte aligned, the array wider than the row: 16-byte loads and a
    partial last chunk); 'offset' (one element past an aligned start:
    element loads)."""
    if layout == "C":
        return device(host_array)
    rows, length = host_array.shape
    width = (length + 16) // 16 * 16 + 16  # a multiple of 16 elements: aligned rows
    base = cupy.full((rows, width), np.nan, host_array.dtype)
    start = 0 if layout == "padded" else 1
    view = base[:, start:start + length]
    view[...] = device(host_array)
    return view


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("length", HELD_LENGTHS)
@pytest.mark.parametrize("layout", ["C", "padded", "offset"])
def test_cupy_held_rows_match_numpy(dtype, length, layout, rng):
    shape = (3, length)
    x_h = random_array(rng, shape, dtype)
    x = in_layout(layout, x_h)
    for op, ref in ((ops.softmax, ref_softmax), (ops.log_softmax, ref_log_softmax)):
        out = in_layout(layout, np.zeros(shape, dtype))
        assert op(x, out=out) is out
        assert_matches(host(out), ref(x_h, -1), dtype, err_msg=op.__name__)
        assert_only_view_written(out)
    labels_h = random_labels(rng, shape).astype(np.int32 if length % 2 else np.int64)
    probs_h = random_probabilities(rng, shape, dtype)
    for labels in (device(labels_h), in_layout(layout, probs_h)):
        expected_labels = labels_h if labels.ndim == 1 else probs_h
        assert_matches(host(ops.softmax_cross_entropy(x, labels)), ref_cross_entropy(x_h, expected_labels), dtype)
        out = in_layout(layout, np.zeros(shape, dtype))
        assert ops.softmax_cross_entropy_grad(x, labels, 2.0, out=out) is out
        assert_matches(host(out), ref_cross_entropy_grad(x_h, expected_labels, 2.0), dtype, scale=2.0 / 3)
        assert_only_view_written(out)


def assert_only_view_written(view):
    """in_layout's NaN padding around `view` (finite results) is untouched."""
    if view.base is not None:
        nans = np.isnan(host(view.base).astype(np.float64)).sum()
        assert nans == view.base.size - view.size


@pytest.mark.parametrize("shape", [(20_000, 300), (3_000, 1024), (2_000, 4096), (300, 8192), (5_000, 1000)])
def test_cupy_held_rows_many(shape, rng):
    """More rows than the grid holds at once: every group takes several."""
    x_h = random_array(rng, shape, np.float32)
    labels_h = random_labels(rng, shape)
    x, labels = device(x_h), device(labels_h)
    assert_matches(host(ops.softmax(x)), ref_softmax(x_h, -1), np.float32)
    assert_matches(host(ops.log_softmax(x)), ref_log_softmax(x_h, -1), np.float32)
    first = host(ops.softmax_cross_entropy(x, labels))
    assert_matches(first, ref_cross_entropy(x_h, labels_h), np.float32)
    assert host(ops.softmax_cross_entropy(x, labels)).tobytes() == first.tobytes()  # deterministic
    assert_matches(host(ops.softmax_cross_entropy_grad(x, labels)), ref_cross_entropy_grad(x_h, labels_h),
                   np.float32, scale=1.0 / shape[0])
    assert ops.softmax(x, out=x) is x  # in place: each row is read whole before it is written
    assert_matches(host(x), ref_softmax(x_h, -1), np.float32)


@pytest.mark.parametrize("length", [1000, 4096])
def test_cupy_held_rows_infinities(length):
    """Rows with +-inf and all -inf behave as on row_kernel (NaN where the
    max is infinite, 0 and -inf where an element is -inf)."""
    x_h = np.zeros((4, length), np.float32)
    x_h[0, 5] = np.inf
    x_h[1, :] = -np.inf
    x_h[2, 7] = -np.inf
    x_h[3, :] = np.arange(length, dtype=np.float32)
    x = device(x_h)
    got = host(ops.softmax(x))
    log = host(ops.log_softmax(x))
    assert np.isnan(got[0, 5]) and np.all(np.isnan(got[1]))
    assert got[2, 7] == 0 and log[2, 7] == -np.inf
    assert_matches(got[2:], ref_softmax(x_h[2:], -1), np.float32)
    assert_matches(log[3], ref_log_softmax(x_h[3:], -1)[0], np.float32)


# --------------------------------------------------- loss streamed by warps
# The loss of index labels on STREAM_ROWS rows or more, unit-stride and
# 16-byte aligned, at least one 16-byte chunk a lane of a warp long, streams
# each row through a warp (8 chunks a lane per step, 4 for float64; the
# label's logit picked from registers; elements after the last whole chunk
# read one by one). Fewer rows, unaligned or strided rows and probability
# labels take the kernels above.

STREAM_ROWS = 1024  # kStreamMinRows in src/cuda/ops_nn.cu


def stream_lengths(dtype):
    """Row lengths of the streamed loss for `dtype`: one chunk a lane, one
    whole step, a step and a chunk, several steps with a partial last one,
    and a row longer than the held kernels take."""
    k = 16 // np.dtype(dtype).itemsize
    step = 32 * k * (4 if np.dtype(dtype).itemsize == 8 else 8)
    return [32 * k, step, step + k, 5 * step - 3 * k, 10_000]


def ref_index_loss(x, labels):
    """Mean of logsumexp(row) - row[label] in float64 (-inf logits allowed)."""
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    lse = m[..., 0] + np.log(np.exp(x - m).sum(axis=-1))
    picked = np.take_along_axis(x, labels[..., None].astype(np.int64), -1)[..., 0]
    return np.float64((lse - picked).mean())


def stream_labels(rng, rows, length, dtype):
    """Random labels, among them the first and the last class and the last
    element of the last whole 16-byte chunk; the narrowest integer dtype."""
    k = 16 // np.dtype(dtype).itemsize
    labels = rng.integers(0, length, size=rows)
    labels[:3] = [0, length - 1, length // k * k - 1]
    return labels.astype(np.uint8 if length <= 256 else np.int32 if length % 2 else np.int64)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("index", range(5))
@pytest.mark.parametrize("layout", ["C", "padded", "offset"])
def test_cupy_streamed_loss_match_numpy(dtype, index, layout, rng):
    # padded: one element shorter, aligned rows: a partial last chunk (and,
    # at the shortest length, one element too short to stream); offset: rows
    # off a 16-byte boundary, which the block-wide kernels take instead
    length = stream_lengths(dtype)[index] - (layout == "padded")
    x_h = random_array(rng, (STREAM_ROWS + 5, length), dtype)
    labels_h = stream_labels(rng, x_h.shape[0], length, dtype)
    x, labels = in_layout(layout, x_h), device(labels_h)
    first = host(ops.softmax_cross_entropy(x, labels))
    assert first.dtype == np.dtype(dtype)
    assert_matches(first, ref_index_loss(x_h, labels_h), dtype)
    assert host(ops.softmax_cross_entropy(x, labels)).tobytes() == first.tobytes()  # deterministic


def test_cupy_streamed_loss_many_rows_strided_rows_and_labels(rng):
    """4200 rows over two axes that do not merge (each warp takes several
    rows), labels a strided view; then probability labels on the same rows."""
    x_h = random_array(rng, (6, 700, 300), np.float32)
    base = cupy.zeros((6, 800, 300), np.float32)
    x = base[:, :700]
    x[...] = device(x_h)
    labels_h = random_labels(rng, x_h.shape)
    labels_base = cupy.zeros((6, 1400), np.int64)
    labels = labels_base[:, ::2]
    labels[...] = device(labels_h)
    assert_matches(host(ops.softmax_cross_entropy(x, labels)), ref_cross_entropy(x_h, labels_h), np.float32)
    probs_h = random_probabilities(rng, x_h.shape, np.float32)  # never streamed
    assert_matches(host(ops.softmax_cross_entropy(x, device(probs_h))), ref_cross_entropy(x_h, probs_h), np.float32)


def test_cupy_streamed_loss_infinities_nan_and_huge_logits(rng):
    x_h = random_array(rng, (STREAM_ROWS, 1000), np.float32) * 1e3  # |x| up to ~2e4: stable
    labels_h = random_labels(rng, x_h.shape)
    x_h[3, (labels_h[3] + 1) % 1000] = -np.inf  # -inf away from the label: a finite loss
    x_h[4, (labels_h[4] + 7) % 1000] = -np.inf
    assert_matches(host(ops.softmax_cross_entropy(device(x_h), device(labels_h))), ref_index_loss(x_h, labels_h),
                   np.float32)
    # Each makes the mean non-finite, as on the CPU: +inf off the label gives
    # an infinite row loss; a row of -inf, or a NaN, gives NaN.
    for row, value in ((5, "inf"), (6, "all -inf"), (7, "nan")):
        bad = x_h.copy()
        if value == "all -inf":
            bad[row] = -np.inf
        else:
            bad[row, (labels_h[row] + 11) % 1000] = float(value)
        loss = host(ops.softmax_cross_entropy(device(bad), device(labels_h)))
        assert not np.isfinite(loss), value
        np.testing.assert_equal(loss, ops.softmax_cross_entropy(bad, labels_h), err_msg=value)


@pytest.mark.parametrize("bad", [300, -1, 2**40])
def test_cupy_streamed_loss_out_of_range_label(bad, rng):
    logits_h = random_array(rng, (STREAM_ROWS, 300), np.float32)
    labels_h = random_labels(rng, logits_h.shape)
    labels_h[517] = bad
    logits, labels = device(logits_h), device(labels_h)
    loss = ops.softmax_cross_entropy(logits, labels)  # no exception, no illegal address
    assert np.isnan(host(loss))
    with pytest.raises(IndexError, match=rf"label {bad}, out of range for 300 classes"):
        ops.relu(logits)
    labels_h[517] = 299
    good = ops.softmax_cross_entropy(logits, device(labels_h))
    assert_matches(host(good), ref_cross_entropy(logits_h, labels_h), np.float32)
    cupy.cuda.Device().synchronize()
    ops.relu(logits)  # valid labels record nothing


# ----------------------------------------------------- out-of-range labels


@pytest.mark.parametrize("bad", ["classes", -1, 2**40])
@pytest.mark.parametrize("classes", [5, 1000, 1027, 3000, 10_000])  # row_kernel, held by a warp / the block
def test_cupy_out_of_range_label_gives_nan_then_index_error_at_the_next_call(bad, classes, rng):
    bad = classes if bad == "classes" else bad
    logits_h = random_array(rng, (4, classes), np.float32)
    labels_h = np.array([0, 1, bad, 2])
    logits, labels = device(logits_h), device(labels_h)
    loss = ops.softmax_cross_entropy(logits, labels)  # no exception, no illegal address
    assert np.isnan(host(loss))  # host() waited for the kernel
    with pytest.raises(IndexError, match=rf"label {bad}, out of range for {classes} classes"):
        ops.relu(logits)  # the next call raises what the kernel recorded
    grad = host(ops.softmax_cross_entropy_grad(logits, labels))  # the record was cleared
    assert np.all(np.isnan(grad[2]))
    good = [0, 1, 3]
    assert_matches(grad[good], ref_cross_entropy_grad(logits_h[good], labels_h[good]) * 3 / 4, np.float32,
                   scale=0.25)
    with pytest.raises(IndexError, match=rf"label {bad}"):
        ops.softmax(logits)  # recorded again by the gradient kernel
    ops.softmax_cross_entropy(logits, device(np.array([0, 1, 2, 3])))
    cupy.cuda.Device().synchronize()
    ops.relu(logits)  # valid labels record nothing


# ------------------------------------------------------- streams and graphs


def test_cupy_explicit_and_current_stream(rng):
    logits_h = random_array(rng, (64, 100), np.float32)
    labels_h = random_labels(rng, logits_h.shape)
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        logits, labels = device(logits_h), device(labels_h)
        loss = ops.softmax_cross_entropy(logits, labels)  # on s, the current stream
        back = cupy.asnumpy(loss, stream=s)
    s.synchronize()
    assert_matches(back, ref_cross_entropy(logits_h, labels_h), np.float32)
    out = cupy.zeros_like(logits)
    cupy.cuda.get_current_stream().synchronize()
    assert ops.softmax(logits, out=out, stream=s) is out
    s.synchronize()
    assert_matches(host(out), ref_softmax(logits_h, -1), np.float32)


# row_kernel, held by a warp / the block; 2048 rows of 256: the streamed loss
@pytest.mark.parametrize("shape", [(128, 40), (100, 500), (64, 3000), (2048, 256)])
def test_cuda_graph_capture_replays_every_op_on_new_data(shape, rng):
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        x = device(random_array(rng, shape, np.float32))
        labels = device(random_labels(rng, shape))
        y_relu, y_soft = cupy.zeros_like(x), cupy.zeros_like(x)
        loss, grad = cupy.zeros((), np.float32), cupy.zeros_like(x)
        ops.softmax_cross_entropy(x, labels)  # warm-up: the process-wide label record is allocated once
    s.synchronize()
    with s:
        s.begin_capture()
        try:
            ops.relu(x, out=y_relu)
            ops.log_softmax(x, out=y_soft)
            ops.softmax_cross_entropy(x, labels, out=loss)   # temporary from the stream-ordered pool
            ops.softmax_cross_entropy_grad(x, labels, loss, out=grad)  # grad scale read on the device
        finally:
            graph = s.end_capture()
    for _ in range(2):  # each replay reads x anew
        new = random_array(rng, shape, np.float32)
        x.set(new, stream=s)
        graph.launch(stream=s)
        s.synchronize()
        assert_matches(host(y_relu), ref_relu(new), np.float32)
        assert_matches(host(y_soft), ref_log_softmax(new, -1), np.float32)
        expected_loss = ref_cross_entropy(new, host(labels))
        assert_matches(host(loss), expected_loss, np.float32)
        assert_matches(host(grad), ref_cross_entropy_grad(new, host(labels), expected_loss), np.float32,
                       scale=0.1)


# ------------------------------------------------------------ bad input


def test_arrays_on_different_devices_raise_value_error(rng):
    logits = device(random_array(rng, (4, 5), np.float32))
    with pytest.raises(ValueError, match="labels is on the CPU"):
        ops.softmax_cross_entropy(logits, np.zeros(4, np.int64))
    with pytest.raises(ValueError, match="grad"):
        ops.relu_grad(logits, random_array(rng, (4, 5), np.float32))
    with pytest.raises(ValueError, match="out"):
        ops.softmax(logits, out=np.zeros((4, 5), np.float32))


def test_cupy_integer_input_raises_type_error():
    with pytest.raises(TypeError, match="x has dtype int32"):
        ops.relu(cupy.ones((3, 3), np.int32))


# ------------------------------------------------------------------- torch


@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_torch_cuda_matches_torch(torch, dtype, rng):
    F = torch.nn.functional
    tdtype = getattr(torch, dtype)
    x = torch.from_numpy(random_array(rng, (64, 300), np.float32)).cuda().to(tdtype)
    g = torch.from_numpy(random_array(rng, (64, 300), np.float32)).cuda().to(tdtype)
    labels = torch.from_numpy(random_labels(rng, x.shape)).cuda()
    tol = {"float16": 4e-3, "bfloat16": 2e-2, "float32": 1e-5}[dtype]
    xr = x.detach().requires_grad_()
    loss = F.cross_entropy(xr.float(), labels)
    (dlogits,) = torch.autograd.grad(loss, xr)
    checks = [
        (ops.relu(x), F.relu(x)),
        (ops.sigmoid(x), torch.sigmoid(x.float())),
        (ops.relu_grad(x, g), torch.where(x > 0, g, torch.zeros_like(g))),
        (ops.softmax(x, 0), F.softmax(x.float(), 0)),
        (ops.log_softmax(x), F.log_softmax(x.float(), -1)),
        (ops.softmax_cross_entropy(x, labels), loss),
        (ops.softmax_cross_entropy_grad(x, labels), dlogits),
    ]
    for ours, expected in checks:
        assert isinstance(ours, torch.Tensor) and ours.device == x.device and ours.dtype == tdtype
        torch.testing.assert_close(ours.float(), expected.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("length", [255, 256, 257, 1024, 1025, 2048, 2049, 4096, 8192, 8193])
def test_torch_cuda_held_rows_16_bit(torch, dtype, length, rng):
    """16-bit rows held in registers (8 elements a chunk) accumulate in float32."""
    F = torch.nn.functional
    tdtype = getattr(torch, dtype)
    x = torch.from_numpy(random_array(rng, (5, length), np.float32)).cuda().to(tdtype)
    labels = torch.from_numpy(random_labels(rng, x.shape)).cuda()
    tol = {"float16": 4e-3, "bfloat16": 2e-2}[dtype]
    xr = x.detach().requires_grad_()
    loss = F.cross_entropy(xr.float(), labels)
    (dlogits,) = torch.autograd.grad(loss, xr)
    checks = [
        (ops.softmax(x), F.softmax(x.float(), -1)),
        (ops.log_softmax(x[:, 1:]), F.log_softmax(x[:, 1:].float(), -1)),  # misaligned: element loads
        (ops.softmax_cross_entropy(x, labels), loss),
        (ops.softmax_cross_entropy_grad(x, labels), dlogits),
    ]
    for ours, expected in checks:
        assert ours.dtype == tdtype
        torch.testing.assert_close(ours.float(), expected.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("length", [256, 2048, 4096, 4095])
def test_torch_cuda_streamed_loss_16_bit(torch, dtype, length, rng):
    """The streamed loss of 16-bit logits (8 elements a chunk; 4095: a
    partial last chunk in rows padded to 16-byte alignment) against torch."""
    F = torch.nn.functional
    tdtype = getattr(torch, dtype)
    base = torch.from_numpy(random_array(rng, (STREAM_ROWS + 3, 4096), np.float32)).cuda().to(tdtype)
    x = base[:, :length]
    labels = torch.from_numpy(random_labels(rng, x.shape)).cuda()
    tol = {"float16": 4e-3, "bfloat16": 2e-2}[dtype]
    torch.testing.assert_close(ops.softmax_cross_entropy(x, labels).float(), F.cross_entropy(x.float(), labels),
                               rtol=tol, atol=tol)


def test_torch_cuda_backward_ops_and_device_scalar_grad(torch, rng):
    F = torch.nn.functional
    x = torch.from_numpy(random_array(rng, (32, 10), np.float64)).cuda().requires_grad_()
    probs = torch.from_numpy(random_probabilities(rng, (32, 10), np.float64)).cuda()
    upstream = torch.tensor(1.5, dtype=torch.float64, device="cuda")
    loss = F.cross_entropy(x, probs)
    (dx,) = torch.autograd.grad(loss, x, upstream)
    xd = x.detach()  # gpufilt refuses tensors that require grad
    torch.testing.assert_close(ops.softmax_cross_entropy(xd, probs), loss.detach())
    torch.testing.assert_close(ops.softmax_cross_entropy_grad(xd, probs, upstream), dx)
    y = torch.sigmoid(x)
    g = torch.randn_like(x)
    (ds,) = torch.autograd.grad(y, x, g)
    torch.testing.assert_close(ops.sigmoid_grad(y.detach(), g), ds)


def test_torch_cuda_stream_and_in_place(torch, rng):
    s = torch.cuda.Stream()
    x_h = random_array(rng, (256, 77), np.float32)
    with torch.cuda.stream(s):
        x = torch.from_numpy(x_h).cuda()
        assert ops.relu(x, out=x) is x  # torch's current stream: s
        y = ops.softmax(x, 0)
    s.synchronize()
    assert_matches(x.cpu().numpy(), ref_relu(x_h), np.float32)
    assert_matches(y.cpu().numpy(), ref_softmax(ref_relu(x_h), 0), np.float32)


def test_torch_cuda_out_of_range_label_is_nan_not_a_crash(torch, rng):
    x = torch.from_numpy(random_array(rng, (3, 4), np.float32)).cuda()
    labels = torch.tensor([0, 9, 1], device="cuda")
    assert torch.isnan(ops.softmax_cross_entropy(x, labels)).item()  # .item() waits
    with pytest.raises(IndexError, match="label 9, out of range for 4 classes"):
        ops.softmax_cross_entropy(x, labels)
    torch.cuda.synchronize()  # the context is still healthy
    assert torch.isfinite(ops.softmax_cross_entropy(x, torch.tensor([0, 3, 1], device="cuda"))).item()
