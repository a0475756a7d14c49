"""gpufilt.torch on CUDA tensors: the checks of test_torch_autograd.py
(_torch_cases.py) on the GPU, plus streams (forward and backward on a side
stream) and staying on the device (torch's sync debug mode: no host
round-trip, no host-built index tensor copied over).

Every test is marked `cuda` (skipped without a usable device, see
conftest.py); results come back to the host in the test only."""
from __future__ import annotations

import contextlib
import warnings

import pytest

torch = pytest.importorskip("torch")

import gpufilt  # noqa: E402
from gpufilt import ndimage as gnd  # noqa: E402
from gpufilt import torch as gt  # noqa: E402

import _torch_cases as cases  # noqa: E402
from _helpers import MODES  # noqa: E402


@contextlib.contextmanager
def no_synchronising_torch_calls():
    """Any synchronising torch call inside raises (torch's sync debug mode,
    a prototype that warns so when switched on)."""
    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(0)

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="torch without CUDA")]

DEVICE = "cuda"
needs_nn = pytest.mark.skipif(not hasattr(gpufilt.ops, "softmax_cross_entropy_grad"),
                              reason="gpufilt.ops' nn kernels are not built in")


@pytest.mark.parametrize("case", cases.CORRELATE_CASES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_correlate1d_gradcheck(rng, mode, case):
    cases.check_correlate1d(rng, DEVICE, mode, case)


@pytest.mark.parametrize("case", cases.CORRELATE_CASES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_uniform_filter1d_gradcheck(rng, mode, case):
    cases.check_uniform_filter1d(rng, DEVICE, mode, case)


@pytest.mark.parametrize("order", [0, 1, 2])
@pytest.mark.parametrize("mode", MODES)
def test_gaussian_filter1d_gradcheck(rng, mode, order):
    cases.check_gaussian_filter1d(rng, DEVICE, mode, order)


@pytest.mark.parametrize("shape, kwargs", cases.GAUSSIAN_CASES, ids=str)
def test_gaussian_filter_gradcheck(rng, shape, kwargs):
    cases.check_filter(rng, DEVICE, "gaussian_filter", shape, kwargs)


@pytest.mark.parametrize("shape, kwargs", cases.UNIFORM_CASES, ids=str)
def test_uniform_filter_gradcheck(rng, shape, kwargs):
    cases.check_filter(rng, DEVICE, "uniform_filter", shape, kwargs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["gaussian_filter", "uniform_filter"])
def test_filter_gradcheck_every_mode(rng, name, mode):
    cases.check_filter(rng, DEVICE, name, (3, 4, 5), dict(cases.EVERY_MODE_ARGS[name], mode=mode))


def test_non_contiguous_gradcheck(rng):
    cases.check_non_contiguous(rng, DEVICE)


def test_expanded_gradient_from_sum(rng):
    cases.check_sum_backward(rng, DEVICE)


@pytest.mark.parametrize("name, args, kwargs", [
    ("gaussian_filter", (1.5,), {"mode": "mirror"}),
    ("uniform_filter", (3,), {"mode": "nearest", "origin": 1}),
    ("correlate1d", ([0.3, -1.0, 2.0],), {"axis": 0, "mode": "wrap"}),
])
def test_gradient_matches_scipy_jacobian(rng, name, args, kwargs):
    cases.check_gradient_against_scipy_jacobian(rng, DEVICE, name, args, kwargs)


@pytest.mark.parametrize("name, args, kwargs", [
    ("correlate1d", ([1.0, 2.0, -1.0],), {"axis": 1, "mode": "constant", "cval": 2.0}),
    ("gaussian_filter", ((1.0, 0.5, 2.0),), {"mode": ("wrap", "nearest", "mirror")}),
    ("uniform_filter", (3,), {"axes": (0, 2), "mode": "grid-wrap"}),
])
def test_forward_identical_to_ndimage(rng, name, args, kwargs):
    cases.check_forward_identical_to_ndimage(rng, DEVICE, name, args, kwargs)


def test_cpu_weights_get_a_cpu_gradient(rng):
    x = cases.tensor(rng, (4, 6), DEVICE)
    w = cases.tensor(rng, (3,), "cpu")
    gt.correlate1d(x, w, 1, mode="reflect").sum().backward()
    w_cuda = w.detach().to(DEVICE).requires_grad_(True)
    gt.correlate1d(x.detach(), w_cuda, 1, mode="reflect").sum().backward()
    assert w.grad.device.type == "cpu" and x.grad.device.type == "cuda"
    assert torch.allclose(w.grad, w_cuda.grad.cpu(), rtol=1e-12, atol=1e-12)


def _filters_and_backward(x):
    """Every filter and its backward, without weights on the host."""
    y = (gt.gaussian_filter(x, (1.0, 2.0), order=(0, 1), mode=("wrap", "mirror"))
         + gt.uniform_filter(x, (3, 20), mode=("nearest", "constant"), origin=(1, -2))
         + gt.gaussian_filter1d(x, 0.8, 0, mode="reflect")
         + gt.uniform_filter1d(x, 4, 1, mode="grid-wrap"))
    return torch.autograd.grad(y, x, torch.ones_like(y) * 0.5)[0]


def test_forward_and_backward_stay_on_the_device(rng):
    x = cases.tensor(rng, (9, 11), DEVICE)
    expected = _filters_and_backward(x.detach().cpu().requires_grad_(True))
    with no_synchronising_torch_calls():
        got = _filters_and_backward(x)
    assert torch.allclose(got.cpu(), expected, rtol=1e-12, atol=1e-12)


def test_forward_and_backward_on_a_side_stream(rng):
    x = cases.tensor(rng, (64, 48), DEVICE)
    expected = _filters_and_backward(x.detach().cpu().requires_grad_(True))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = _filters_and_backward(x)
    torch.cuda.current_stream().wait_stream(s)
    assert torch.allclose(got.cpu(), expected, rtol=1e-12, atol=1e-12)


def test_ndimage_refuses_cuda_tensor_that_requires_grad(rng):
    x = cases.tensor(rng, (4, 5), DEVICE)
    with pytest.raises(ValueError, match="gpufilt.torch"):
        gnd.uniform_filter(x, 3)


# -------------------------------------------------------------------- nn ops

@needs_nn
@pytest.mark.parametrize("shape", cases.NN_SHAPES, ids=str)
@pytest.mark.parametrize("name", ["relu", "sigmoid", "softmax", "log_softmax"])
def test_nn_gradcheck(rng, name, shape):
    for axis in range(-1, len(shape) - 1):
        cases.check_nn_gradcheck(rng, DEVICE, name, shape, axis)


@needs_nn
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["relu", "sigmoid", "softmax", "log_softmax"])
def test_nn_forward_matches_torch(rng, name, dtype):
    for shape in cases.NN_SHAPES:
        cases.check_nn_forward(rng, DEVICE, name, shape, 0, dtype)


@needs_nn
@pytest.mark.parametrize("one_hot", [False, True])
def test_softmax_cross_entropy(rng, one_hot):
    cases.check_cross_entropy(rng, DEVICE, one_hot)


@needs_nn
def test_softmax_cross_entropy_class_axis_1(rng):
    cases.check_cross_entropy_class_axis_1(rng, DEVICE)


@needs_nn
def test_nn_stay_on_the_device(rng):
    logits = cases.tensor(rng, (8, 10), DEVICE)
    labels = cases.labels_for(rng, 8, 10, DEVICE, one_hot=False)
    with no_synchronising_torch_calls():
        loss = (gt.softmax_cross_entropy(logits, labels) + gt.relu(logits).sum()
                + gt.sigmoid(logits).sum() + gt.softmax(logits).pow(2).sum()
                + gt.log_softmax(logits, 0).sum())
        (grad,) = torch.autograd.grad(loss, logits)
    assert grad.device == logits.device and torch.isfinite(grad).all()
