"""gpufilt.torch on CPU tensors: gradcheck (float64) of every filter in every
boundary mode, 1-D to 3-D, origins, extensions longer than the axis,
non-contiguous tensors; forward parity with scipy.ndimage and identity with
gpufilt.ndimage; the nn ops against torch; bad input; gpufilt.ndimage on
tensors that require grad. The same checks run on CUDA in
test_torch_autograd_cuda.py (cases in _torch_cases.py)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gpufilt  # noqa: E402
from gpufilt import ndimage as gnd  # noqa: E402
from gpufilt import torch as gt  # noqa: E402

import _torch_cases as cases  # noqa: E402
from _helpers import MODES, assert_matches, scipy_reference  # noqa: E402

DEVICE = "cpu"
NN_READY = hasattr(gpufilt.ops, "softmax_cross_entropy_grad")
needs_nn = pytest.mark.skipif(not NN_READY, reason="gpufilt.ops' nn kernels are not built in")


# ------------------------------------------------------------ border index

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 2, 5])
def test_border_index_matches_scipy_extension(mode, n):
    # correlate1d with a one-hot weight at tap k reads x[b(k - centre)] into
    # y[0]; x = 1..n and cval 0 turn 'cval' into -1.
    taps, x = 8 * n + 1, np.arange(1.0, n + 1)
    positions = torch.arange(taps) - taps // 2
    got = gt.border_index(positions, n, gpufilt._args.mode_code(mode))
    for k, p in enumerate(positions.tolist()):
        w = np.zeros(taps)
        w[k] = 1.0
        read = scipy_reference("correlate1d", x, w, mode=mode, cval=0.0)[0] - 1
        assert got[k] == read, f"position {p}"


# --------------------------------------------------------- filter gradients

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


@pytest.mark.parametrize("mode", ["reflect", "constant", "wrap"])
def test_convolve1d_gradcheck(rng, mode):
    x = cases.tensor(rng, (4, 6), DEVICE)
    w = cases.tensor(rng, (4,), DEVICE)
    assert cases.gradcheck(lambda x, w: gt.convolve1d(x, w, 1, mode=mode, origin=-1),
                                    (x, w))
    expected = scipy_reference("convolve1d", cases.host(x), cases.host(w), 1, mode=mode, origin=-1)
    assert_matches(cases.host(gt.convolve1d(x, w, 1, mode=mode, origin=-1)), expected)


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


@pytest.mark.parametrize("mode", ["reflect", "constant", "mirror"])
def test_complex_input_gradcheck(rng, mode):
    x = torch.tensor(rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5)),
                     requires_grad=True)
    w = cases.tensor(rng, (4,), DEVICE)
    assert cases.gradcheck(lambda x, w: gt.correlate1d(x, w, mode=mode), (x, w))


def test_weights_on_cpu_without_grad_and_numpy_weights(rng):
    x = cases.tensor(rng, (5, 6), DEVICE)
    w = np.array([0.5, -1.0, 0.25])
    for weights in (w, torch.tensor(w), w.tolist()):
        y = gt.correlate1d(x, weights, 0, mode="nearest")
        assert torch.equal(y.detach(), gnd.correlate1d(x.detach(), w, 0, mode="nearest"))


def test_float32_gradient_close_to_float64(rng):
    x64 = cases.tensor(rng, (6, 7), DEVICE)
    x32 = x64.detach().float().requires_grad_(True)
    g = torch.randn(6, 7, dtype=torch.float64)
    for x in (x64, x32):
        gt.gaussian_filter(x, 1.2, mode="reflect").backward(g.to(x.dtype))
    assert x32.grad.dtype == torch.float32
    assert torch.allclose(x32.grad.double(), x64.grad, rtol=1e-5, atol=1e-5)


def test_empty_tensor(rng):
    x = torch.zeros((0, 4), dtype=torch.float64, requires_grad=True)
    w = torch.ones(3, dtype=torch.float64, requires_grad=True)
    gt.correlate1d(x, w, 0).sum().backward()
    assert x.grad.shape == (0, 4) and torch.equal(w.grad, torch.zeros(3, dtype=torch.float64))


@pytest.mark.parametrize("name, args, kwargs", [
    ("correlate1d", ([1.0, 2.0, -1.0],), {"axis": 1, "mode": "constant", "cval": 2.0}),
    ("convolve1d", ([1.0, 2.0],), {"axis": 0, "origin": -1}),
    ("gaussian_filter1d", (1.2,), {"axis": 2, "order": 1}),
    ("gaussian_filter", ((1.0, 0.5, 2.0),), {"mode": ("wrap", "nearest", "mirror")}),
    ("uniform_filter1d", (4,), {"axis": 0, "origin": -2}),
    ("uniform_filter", (3,), {"axes": (0, 2), "mode": "grid-wrap"}),
])
def test_forward_identical_to_ndimage(rng, name, args, kwargs):
    cases.check_forward_identical_to_ndimage(rng, DEVICE, name, args, kwargs)


def test_double_backward_raises(rng):
    x = cases.tensor(rng, (5, 5), DEVICE)
    (grad,) = torch.autograd.grad(gt.gaussian_filter(x, 1.0).pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        grad.sum().backward()


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("call, error, match", [
    (lambda x: gt.gaussian_filter(x.detach().numpy(), 1.0), TypeError, "torch.Tensor"),
    (lambda x: gt.gaussian_filter(x, 1.0, output=torch.empty(3, 4)), ValueError, "output="),
    (lambda x: gt.uniform_filter(x, 3, mode="bogus"), ValueError, "mode"),
    (lambda x: gt.correlate1d(x, [1.0, 2.0], cval=torch.tensor(1.0)), TypeError, "cval"),
    (lambda x: gt.correlate1d(x, [1.0, 1j]), TypeError, "complex weights"),
    (lambda x: gt.correlate1d(x, torch.ones(2, dtype=torch.complex128)), TypeError, "complex"),
    (lambda x: gt.correlate1d(x, [[1.0, 2.0]]), ValueError, "1-D"),
    (lambda x: gt.convolve1d(x, torch.tensor(1.0)), ValueError, "1-D"),
    (lambda x: gt.correlate1d(x, [1.0, 2.0], origin=5), ValueError, "origin"),
    (lambda x: gt.uniform_filter1d(x, 3, axis=2), Exception, "axis"),
    (lambda x: gt.gaussian_filter(x, (1.0, 2.0, 3.0)), ValueError, "sigma"),
    (lambda x: gt.gaussian_filter(x, 1.0, cval=1j), ValueError, "complex"),
    (lambda x: gt.uniform_filter(x.to(torch.bfloat16), 3), TypeError, "bfloat16"),
])
def test_bad_input_raises(call, error, match):
    x = torch.ones(3, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(error, match=match):
        call(x)


# ------------------------------------- gpufilt.ndimage on tensors with grad

def test_ndimage_refuses_tensor_that_requires_grad_in_grad_mode():
    x = torch.ones(4, 5, requires_grad=True)
    with pytest.raises(ValueError, match="gpufilt.torch"):
        gnd.gaussian_filter(x, 1.0)
    out = torch.zeros(4, 5, requires_grad=True)
    with pytest.raises(ValueError, match="output"):
        gnd.gaussian_filter(x.detach(), 1.0, output=out)
    assert torch.equal(out, torch.zeros(4, 5))


def test_ndimage_accepts_tensor_that_requires_grad_under_no_grad(rng):
    data = cases.random_array(rng, (5, 6), "float32")
    x = torch.tensor(data, requires_grad=True)
    with torch.no_grad():
        got = gnd.gaussian_filter(x, 1.0)
    assert not got.requires_grad
    assert_matches(got.numpy(), scipy_reference("gaussian_filter", data, 1.0))


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
@pytest.mark.parametrize("name", ["relu", "sigmoid", "softmax", "log_softmax"])
def test_nn_forward_identical_to_ops(rng, name):
    x = cases.tensor(rng, (4, 6), DEVICE, dtype="float32")
    assert torch.equal(getattr(gt, name)(x).detach(), getattr(gpufilt.ops, name)(x.detach()))


@needs_nn
@pytest.mark.parametrize("name", ["relu", "sigmoid", "softmax", "log_softmax"])
def test_nn_bfloat16_forward_and_backward(rng, name):
    x64 = cases.tensor(rng, (3, 8), DEVICE)
    x16 = x64.detach().to(torch.bfloat16).requires_grad_(True)
    y = cases.nn_call(name, x16)
    y.float().pow(2).sum().backward()
    assert y.dtype == x16.grad.dtype == torch.bfloat16
    reference = cases.nn_call(name, x64, library=torch)
    reference.pow(2).sum().backward()
    assert torch.allclose(y.double(), reference.detach(), rtol=2e-2, atol=5e-2)
    assert torch.allclose(x16.grad.double(), x64.grad, rtol=5e-2, atol=5e-2)


@needs_nn
@pytest.mark.parametrize("one_hot", [False, True])
def test_softmax_cross_entropy(rng, one_hot):
    cases.check_cross_entropy(rng, DEVICE, one_hot)


@needs_nn
def test_softmax_cross_entropy_class_axis_1(rng):
    cases.check_cross_entropy_class_axis_1(rng, DEVICE)


@needs_nn
def test_nn_double_backward_raises(rng):
    x = cases.tensor(rng, (3, 4), DEVICE)
    (grad,) = torch.autograd.grad(gt.softmax(x).pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        grad.sum().backward()


def test_cross_entropy_labels_requiring_grad_raise():
    logits = torch.ones(2, 3, requires_grad=True)
    labels = torch.ones(2, 3, requires_grad=True)
    with pytest.raises(ValueError, match="labels"):
        gt.softmax_cross_entropy(logits, labels)
