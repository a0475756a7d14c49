"""gpufilt.ops neural-network kernels on the CPU: relu, sigmoid and their
gradients, softmax, log_softmax, softmax cross-entropy and its gradient.

Oracles: numpy in float64 on random data (every dtype, axis and layout), and
torch on the CPU where it defines the op (F.relu, torch.sigmoid, F.softmax,
F.log_softmax, F.cross_entropy and their backward). Bad input raises the
documented exception and leaves the caller's arrays untouched.
"""
from __future__ import annotations

import numpy as np
import pytest

from gpufilt import ops

from _helpers import FLOAT_DTYPES, assert_matches, random_array

# ------------------------------------------------------------------ oracles


def ref_relu(x):
    return np.where(x > 0, x, 0).astype(x.dtype)


def ref_sigmoid(x):
    x = x.astype(np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def ref_log_softmax(x, axis):
    x = x.astype(np.float64)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def ref_softmax(x, axis):
    return np.exp(ref_log_softmax(x, axis))


def ref_onehot(labels, classes, axis, ndim):
    """Probabilities of index labels, with the class axis at `axis`."""
    onehot = np.eye(classes)[labels]  # class axis last
    return np.moveaxis(onehot, -1, axis % ndim)


def ref_cross_entropy(logits, labels, axis=-1):
    logp = ref_log_softmax(logits, axis)
    if labels.dtype.kind in "iu":
        labels = ref_onehot(labels, logits.shape[axis], axis, logits.ndim)
    return -(labels.astype(np.float64) * logp).sum(axis=axis).mean()


def ref_cross_entropy_grad(logits, labels, grad=1.0, axis=-1):
    if labels.dtype.kind in "iu":
        labels = ref_onehot(labels, logits.shape[axis], axis, logits.ndim)
    rows = logits.size // logits.shape[axis]
    return (ref_softmax(logits, axis) - labels.astype(np.float64)) * grad / rows


def random_labels(rng, logits_shape, axis=-1):
    shape = list(logits_shape)
    classes = shape.pop(axis % len(shape))
    return rng.integers(0, classes, size=shape)


def random_probabilities(rng, shape, dtype, axis=-1):
    p = rng.random(shape) + 0.01
    return (p / p.sum(axis=axis, keepdims=True)).astype(dtype)


def layouts(x):
    """Views of random data `x` in several memory layouts (same values)."""
    yield "C", np.ascontiguousarray(x)
    yield "F", np.asfortranarray(x)
    big = np.zeros(tuple(2 * n + 1 for n in x.shape), x.dtype)
    view = big[tuple(slice(1, None, 2) for _ in x.shape)]
    view[...] = x
    yield "strided", view
    flipped = np.ascontiguousarray(x[tuple(slice(None, None, -1) for _ in x.shape)])
    yield "negative", flipped[tuple(slice(None, None, -1) for _ in x.shape)]


def layout_ids(x):
    return [name for name, _ in layouts(x)]


# --------------------------------------------------------------- pointwise


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", [(1000,), (7, 13), (3, 4, 5), (), (0, 3)])
def test_relu_and_sigmoid_match_numpy(dtype, shape, rng):
    x = random_array(rng, shape, dtype)
    assert_matches(ops.relu(x), ref_relu(x), dtype)
    assert_matches(ops.sigmoid(x), ref_sigmoid(x), dtype)
    assert ops.relu(x).dtype == dtype and ops.relu(x).shape == shape


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_pointwise_grads_match_numpy(dtype, rng):
    x = random_array(rng, (9, 31), dtype)
    g = random_array(rng, (9, 31), dtype)
    y = ops.sigmoid(x)
    assert_matches(ops.relu_grad(x, g), np.where(x > 0, g, 0), dtype)
    expected = g.astype(np.float64) * (1 - y.astype(np.float64)) * y.astype(np.float64)
    assert_matches(ops.sigmoid_grad(y, g), expected, dtype)


@pytest.mark.parametrize("name", ["relu", "sigmoid", "relu_grad", "sigmoid_grad"])
def test_pointwise_any_layout(name, rng):
    base = random_array(rng, (6, 10, 4), np.float32)
    grad = random_array(rng, base.shape, np.float32)
    expected = None
    for layout, x in layouts(base):
        for _, g in layouts(grad):
            args = (x, g) if name.endswith("grad") else (x,)
            got = getattr(ops, name)(*args)
            if expected is None:
                expected = getattr(ops, name)(*(a.copy() for a in args))
            np.testing.assert_array_equal(got, expected, err_msg=layout)
    out = np.zeros((4, 10, 6), np.float32).transpose(2, 1, 0)  # any output layout too
    args = (base, grad) if name.endswith("grad") else (base,)
    assert getattr(ops, name)(*args, out=out) is out
    np.testing.assert_array_equal(out, expected)


def test_sigmoid_is_stable_for_huge_inputs():
    x = np.array([-1e4, -100.0, -30.0, 0.0, 30.0, 100.0, 1e4], np.float32)
    with np.errstate(all="raise"):
        y = ops.sigmoid(x)
    assert np.all(np.isfinite(y))
    assert_matches(y, ref_sigmoid(x), np.float32)
    assert y[0] == 0.0 and y[-1] == 1.0


def test_relu_keeps_nan_as_torch():
    x = np.array([np.nan, -1.0, 2.0], np.float64)
    y = ops.relu(x)
    assert np.isnan(y[0]) and y[1] == 0 and y[2] == 2


def test_relu_in_place_returns_the_same_array(rng):
    x = random_array(rng, (50, 33), np.float32)
    expected = ref_relu(x)
    assert ops.relu(x, out=x) is x
    np.testing.assert_array_equal(x, expected)


# ---------------------------------------------------------------- softmax


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_matches_numpy_on_every_axis(dtype, axis, log, rng):
    x = random_array(rng, (5, 6, 7), dtype)
    got = (ops.log_softmax if log else ops.softmax)(x, axis)
    expected = (ref_log_softmax if log else ref_softmax)(x, axis)
    assert got.dtype == dtype
    assert_matches(got, expected, dtype)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_softmax_any_layout(log, axis, rng):
    base = random_array(rng, (12, 9), np.float64)
    fn = ops.log_softmax if log else ops.softmax
    expected = (ref_log_softmax if log else ref_softmax)(base, axis)
    for layout, x in layouts(base):
        assert_matches(fn(x, axis), expected, np.float64, err_msg=layout)
        out = np.full(base.shape[::-1], np.nan).T
        assert fn(x, axis, out=out) is out
        assert_matches(out, expected, np.float64, err_msg=layout)


@pytest.mark.parametrize("shape", [(), (0, 5), (5, 0), (1, 1), (3000,), (2, 70000)])
def test_softmax_edge_shapes(shape, rng):
    x = random_array(rng, shape, np.float32)
    assert_matches(ops.softmax(x), ref_softmax(x, -1) if x.size else x, np.float32)
    assert_matches(ops.log_softmax(x, 0 if x.ndim else -1),
                   ref_log_softmax(x, 0) if x.size else x, np.float32)


def test_softmax_is_stable_for_huge_logits():
    x = np.array([[1e4, -1e4, 0.0], [1e4, 1e4 - 1, 1e4 - 2], [-1e4, -1e4, -1e4 + 3]], np.float32)
    assert_matches(ops.softmax(x), ref_softmax(x, -1), np.float32)
    assert_matches(ops.log_softmax(x), ref_log_softmax(x, -1), np.float32)
    assert np.all(np.isfinite(ops.log_softmax(x)))


def test_softmax_handles_minus_infinity_and_nan():
    x = np.array([[-np.inf, 0.0, 1.0], [np.nan, 0.0, 1.0]], np.float64)
    y = ops.softmax(x)
    assert_matches(y[0], ref_softmax(x[:1], -1)[0], np.float64)
    assert np.all(np.isnan(y[1]))


def test_softmax_in_place(rng):
    x = random_array(rng, (8, 30), np.float64)
    expected = ref_softmax(x, 0)
    assert ops.softmax(x, 0, out=x) is x
    assert_matches(x, expected, np.float64)


# ---------------------------------------------------------- cross-entropy


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", [(16, 10), (3, 1000), (1, 1), (40, 3)])
@pytest.mark.parametrize("kind", ["index", "probability"])
def test_cross_entropy_matches_numpy(dtype, shape, kind, rng):
    logits = random_array(rng, shape, dtype)
    labels = random_labels(rng, shape) if kind == "index" else random_probabilities(rng, shape, dtype)
    loss = ops.softmax_cross_entropy(logits, labels)
    assert isinstance(loss, np.ndarray) and loss.shape == () and loss.dtype == dtype
    assert_matches(loss, ref_cross_entropy(logits, labels), dtype)
    grad = ops.softmax_cross_entropy_grad(logits, labels)
    assert grad.dtype == dtype and grad.shape == shape
    assert_matches(grad, ref_cross_entropy_grad(logits, labels), dtype, scale=1.0 / shape[0])


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("kind", ["index", "probability"])
def test_cross_entropy_class_axis_and_extra_dims(axis, kind, rng):
    shape = (4, 5, 6)
    logits = random_array(rng, shape, np.float64)
    labels = (random_labels(rng, shape, axis) if kind == "index"
              else random_probabilities(rng, shape, np.float64, axis))
    assert_matches(ops.softmax_cross_entropy(logits, labels, axis), ref_cross_entropy(logits, labels, axis))
    assert_matches(ops.softmax_cross_entropy_grad(logits, labels, 0.5, axis=axis),
                   ref_cross_entropy_grad(logits, labels, 0.5, axis), np.float64)


@pytest.mark.parametrize("kind", ["index", "probability"])
def test_cross_entropy_any_layout(kind, rng):
    base = random_array(rng, (11, 7), np.float32)
    labels = (random_labels(rng, base.shape) if kind == "index"
              else random_probabilities(rng, base.shape, np.float32))
    expected_loss = ref_cross_entropy(base, labels)
    expected_grad = ref_cross_entropy_grad(base, labels)
    for layout, x in layouts(base):
        for _, lab in layouts(labels):
            assert_matches(ops.softmax_cross_entropy(x, lab), expected_loss, np.float32, err_msg=layout)
            assert_matches(ops.softmax_cross_entropy_grad(x, lab), expected_grad, np.float32, scale=0.1,
                           err_msg=layout)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_cross_entropy_is_stable_for_huge_logits(dtype):
    logits = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, 1e4], [1e4, 1e4, 1e4], [-1e4, -1e4, -1e4]], dtype)
    labels = np.array([1, 2, 0, 2])
    probs = np.array([[0.5, 0.5, 0], [0, 0, 1], [0.2, 0.3, 0.5], [1, 0, 0]], dtype)
    for lab in (labels, probs):
        loss = ops.softmax_cross_entropy(logits, lab)
        assert np.isfinite(loss)
        assert_matches(loss, ref_cross_entropy(logits, lab), dtype)
        grad = ops.softmax_cross_entropy_grad(logits, lab)
        assert np.all(np.isfinite(grad))
        assert_matches(grad, ref_cross_entropy_grad(logits, lab), dtype, scale=0.25)


def test_cross_entropy_grad_scale_as_number_and_0d_array(rng):
    logits = random_array(rng, (6, 4), np.float64)
    labels = random_labels(rng, logits.shape)
    expected = ref_cross_entropy_grad(logits, labels, 3.0)
    for grad in (3, 3.0, np.float64(3.0), np.array(3.0), np.array(3.0, np.float32)):
        assert_matches(ops.softmax_cross_entropy_grad(logits, labels, grad), expected, np.float64)


def test_cross_entropy_out_and_in_place_grad(rng):
    logits = random_array(rng, (5, 9), np.float32)
    labels = random_labels(rng, logits.shape).astype(np.int32)
    expected = ref_cross_entropy_grad(logits, labels)
    loss_out = np.zeros((), np.float32)
    assert ops.softmax_cross_entropy(logits, labels, out=loss_out) is loss_out
    assert_matches(loss_out, ref_cross_entropy(logits, labels), np.float32)
    assert ops.softmax_cross_entropy_grad(logits, labels, out=logits) is logits
    assert_matches(logits, expected, np.float32, scale=0.2)


def test_cross_entropy_empty_batch_is_nan():
    loss = ops.softmax_cross_entropy(np.zeros((0, 4), np.float32), np.zeros((0,), np.int64))
    assert np.isnan(loss)
    assert ops.softmax_cross_entropy_grad(np.zeros((0, 4)), np.zeros((0,), np.int64)).shape == (0, 4)


@pytest.mark.parametrize("bad", [5, -1, 2**40])
@pytest.mark.parametrize("fn", ["softmax_cross_entropy", "softmax_cross_entropy_grad"])
def test_cross_entropy_label_out_of_range_raises_index_error(bad, fn, rng):
    logits = random_array(rng, (4, 5), np.float32)
    labels = np.array([0, 4, bad, 1])
    out = np.full((4, 5) if fn.endswith("grad") else (), 7.0, np.float32)
    before = logits.copy()
    with pytest.raises(IndexError, match=rf"labels\[2\].*{bad}.*5 classes"):
        getattr(ops, fn)(logits, labels, out=out)
    np.testing.assert_array_equal(logits, before)
    assert np.all(out == 7.0)


# -------------------------------------------------------------- bad input


@pytest.mark.parametrize("call", [
    lambda x: ops.relu(x), lambda x: ops.sigmoid(x), lambda x: ops.softmax(x),
    lambda x: ops.log_softmax(x), lambda x: ops.relu_grad(x, x)])
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "bool", "complex64"])
def test_non_float_inputs_raise_type_error(call, dtype):
    with pytest.raises(TypeError, match=r"\bx has dtype"):
        call(np.ones((3, 4), dtype))


def test_non_float_logits_and_labels_raise_type_error():
    with pytest.raises(TypeError, match="logits has dtype"):
        ops.softmax_cross_entropy(np.ones((3, 4), np.int64), np.zeros(3, np.int64))
    with pytest.raises(TypeError, match="labels have dtype bool"):
        ops.softmax_cross_entropy(np.ones((3, 4)), np.zeros(3, bool))
    with pytest.raises(TypeError, match="probability labels have dtype float32"):
        ops.softmax_cross_entropy(np.ones((3, 4)), np.ones((3, 4), np.float32))
    with pytest.raises(TypeError, match="grad has dtype int64"):
        ops.softmax_cross_entropy_grad(np.ones((3, 4)), np.zeros(3, np.int64), np.array(1))


def test_shape_mismatches_raise_value_error_naming_the_arguments():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"grad has shape \(4, 3\) but x"):
        ops.relu_grad(x, np.ones((4, 3), np.float32))
    with pytest.raises(ValueError, match=r"grad has shape \(3,\) but y"):
        ops.sigmoid_grad(x, np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"index labels must have.*\(3,\); got labels of shape \(4,\)"):
        ops.softmax_cross_entropy(x, np.zeros(4, np.int64))
    with pytest.raises(ValueError, match=r"probability labels must have.*got labels of shape \(3, 5\)"):
        ops.softmax_cross_entropy_grad(x, np.ones((3, 5), np.float32))
    with pytest.raises(ValueError, match="grad must be a number or a 0-d array"):
        ops.softmax_cross_entropy_grad(x, np.zeros(3, np.int64), np.ones(2))
    with pytest.raises(ValueError, match="class axis"):
        ops.softmax_cross_entropy(np.float32(1), np.int64(0))
    with pytest.raises(ValueError, match="no classes"):
        ops.softmax_cross_entropy(np.ones((3, 0)), np.zeros(3, np.int64))


@pytest.mark.parametrize("fn", ["relu", "sigmoid", "softmax", "log_softmax"])
def test_bad_out_raises_naming_out(fn):
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"out has shape \(4, 3\)"):
        getattr(ops, fn)(x, out=np.ones((4, 3), np.float32))
    with pytest.raises(TypeError, match="out has dtype float64"):
        getattr(ops, fn)(x, out=np.ones((3, 4), np.float64))
    readonly = np.ones((3, 4), np.float32)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="out"):
        getattr(ops, fn)(x, out=readonly)


def test_bad_loss_out_raises_naming_out():
    logits, labels = np.ones((3, 4), np.float32), np.zeros(3, np.int64)
    with pytest.raises(ValueError, match=r"out has shape \(1,\)"):
        ops.softmax_cross_entropy(logits, labels, out=np.zeros(1, np.float32))
    with pytest.raises(TypeError, match="out has dtype float64"):
        ops.softmax_cross_entropy(logits, labels, out=np.zeros((), np.float64))


def test_partly_overlapping_out_raises_and_leaves_data_untouched(rng):
    buf = random_array(rng, (10,), np.float32)
    before = buf.copy()
    with pytest.raises(ValueError, match="out overlaps x"):
        ops.relu(buf[:-1], out=buf[1:])
    with pytest.raises(ValueError, match="out overlaps x"):
        ops.softmax(buf[:-1], out=buf[1:])
    np.testing.assert_array_equal(buf, before)


def test_axis_out_of_bounds_raises():
    with pytest.raises(ValueError, match="out of bounds"):
        ops.softmax(np.ones((3, 4)), axis=2)
    with pytest.raises(ValueError, match="out of bounds"):
        ops.softmax_cross_entropy(np.ones((3, 4)), np.zeros(3, np.int64), axis=-3)


# ------------------------------------------------------------------ torch

torch_params = pytest.mark.parametrize("dtype", ["float32", "float64"])


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@torch_params
def test_activations_and_backward_match_torch(torch, dtype, rng):
    x = torch.from_numpy(random_array(rng, (17, 23), dtype)).requires_grad_()
    g = torch.from_numpy(random_array(rng, (17, 23), dtype))
    for name, fn in (("relu", torch.nn.functional.relu), ("sigmoid", torch.sigmoid)):
        y = fn(x)
        (dx,) = torch.autograd.grad(y, x, g)
        ours = getattr(ops, name)(x.detach())  # gpufilt refuses tensors that require grad
        assert isinstance(ours, torch.Tensor) and ours.dtype == x.dtype
        assert_matches(ours.numpy(), y.detach().numpy(), dtype)
        backward = ops.relu_grad(x.detach(), g) if name == "relu" else ops.sigmoid_grad(y.detach(), g)
        assert_matches(backward.numpy(), dx.numpy(), dtype)


@torch_params
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_and_backward_match_torch(torch, dtype, axis, rng):
    F = torch.nn.functional
    x = torch.from_numpy(random_array(rng, (6, 9, 5), dtype))
    assert_matches(ops.softmax(x, axis).numpy(), F.softmax(x, axis).numpy(), dtype)
    assert_matches(ops.log_softmax(x, axis).numpy(), F.log_softmax(x, axis).numpy(), dtype)


@torch_params
@pytest.mark.parametrize("kind", ["index", "probability"])
def test_cross_entropy_and_backward_match_torch(torch, dtype, kind, rng):
    F = torch.nn.functional
    logits = torch.from_numpy(random_array(rng, (32, 10), dtype)).requires_grad_()
    labels = (random_labels(rng, logits.shape) if kind == "index"
              else random_probabilities(rng, logits.shape, dtype))
    labels = torch.from_numpy(labels)
    loss = F.cross_entropy(logits, labels)
    (dlogits,) = torch.autograd.grad(loss, logits, torch.tensor(2.5, dtype=logits.dtype))
    logits = logits.detach()  # gpufilt refuses tensors that require grad
    ours = ops.softmax_cross_entropy(logits, labels)
    assert isinstance(ours, torch.Tensor) and ours.shape == () and ours.dtype == logits.dtype
    assert_matches(ours.numpy(), loss.detach().numpy(), dtype)
    grad = ops.softmax_cross_entropy_grad(logits, labels, torch.tensor(2.5, dtype=logits.dtype))
    assert_matches(grad.numpy(), dlogits.numpy(), dtype, scale=0.1)


@pytest.mark.parametrize("kind", ["index", "probability"])
def test_cross_entropy_torch_layout_with_class_axis_1(torch, kind, rng):
    F = torch.nn.functional
    logits = torch.from_numpy(random_array(rng, (4, 6, 3, 5), "float64")).requires_grad_()
    labels = (random_labels(rng, logits.shape, 1) if kind == "index"
              else random_probabilities(rng, logits.shape, "float64", 1))
    labels = torch.from_numpy(labels)
    loss = F.cross_entropy(logits, labels)
    (dlogits,) = torch.autograd.grad(loss, logits)
    logits = logits.detach()  # gpufilt refuses tensors that require grad
    assert_matches(ops.softmax_cross_entropy(logits, labels, axis=1).numpy(), loss.detach().numpy())
    assert_matches(ops.softmax_cross_entropy_grad(logits, labels, axis=1).numpy(), dlogits.numpy())


def test_bfloat16_torch_cpu(torch, rng):
    F = torch.nn.functional
    x = torch.from_numpy(random_array(rng, (8, 40), "float32")).to(torch.bfloat16)
    labels = torch.from_numpy(random_labels(rng, x.shape))
    checks = [(ops.relu(x), F.relu(x)), (ops.sigmoid(x), torch.sigmoid(x.float())),
              (ops.softmax(x), F.softmax(x.float(), -1)), (ops.log_softmax(x), F.log_softmax(x.float(), -1)),
              (ops.softmax_cross_entropy(x, labels), F.cross_entropy(x.float(), labels))]
    for ours, expected in checks:
        assert ours.dtype == torch.bfloat16
        np.testing.assert_allclose(ours.float().numpy(), expected.float().numpy(), rtol=1e-2, atol=1e-2)
    out = torch.empty_like(x)
    assert ops.softmax_cross_entropy_grad(x, labels, out=out) is out
