"""Cases and checks of gpufilt.torch shared by test_torch_autograd.py (CPU)
and test_torch_autograd_cuda.py: each check takes the torch device.

Gradients are checked with torch.autograd.gradcheck in float64 (finite
differences of gpufilt's own forward against the analytic backward); forward
results against scipy.ndimage (filters) or torch.nn.functional (nn ops).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.autograd

from gpufilt import ndimage as gnd
from gpufilt import torch as gt

from _helpers import assert_matches, random_array, scipy_reference

def gradcheck(f, inputs):
    """torch's gradcheck; two backward runs may differ in the last bits on
    CUDA, where index_add_ folds several boundary positions onto one element
    with atomics (gpufilt.torch's docstring), hence a tolerance for that."""
    return torch.autograd.gradcheck(f, inputs, nondet_tol=1e-12)


# (shape, axis, taps, origin): 1-D to 3-D, taps longer than the axis (the
# extension wraps around more than once), extreme origins, one-element axes.
CORRELATE_CASES = [
    ((7,), 0, 3, 0),
    ((6,), -1, 4, -2),
    ((3,), 0, 9, 4),
    ((1,), 0, 5, -1),
    ((2, 5), 0, 7, 3),
    ((4, 5), 1, 2, 0),
    ((3, 2, 4), 1, 6, -3),
    ((2, 3, 4), 2, 5, 1),
]

# gaussian_filter: per-axis sigmas, orders and modes, axes, truncate, radius
# (a radius over the axis length), a zero sigma (that axis is skipped).
GAUSSIAN_CASES = [
    ((9,), dict(sigma=1.2)),
    ((5,), dict(sigma=2.0)),
    ((4, 6), dict(sigma=(0.8, 1.5), order=(1, 0), mode=("wrap", "mirror"))),
    ((3, 4, 5), dict(sigma=1.0, order=(0, 2, 1), mode=("reflect", "constant", "nearest"),
                     truncate=2.0, cval=0.5)),
    ((3, 4, 5), dict(sigma=(1.5, 0.7), axes=(2, 0), radius=(1, 6),
                     mode=("grid-wrap", "grid-constant"))),
    ((4, 5), dict(sigma=(0.0, 1.1), mode="grid-mirror")),
]

# uniform_filter: per-axis sizes, origins and modes, axes, sizes over the axis.
UNIFORM_CASES = [
    ((8,), dict(size=3)),
    ((4,), dict(size=6, origin=-3)),
    ((3, 5), dict(size=(4, 2), origin=(1, -1), mode=("mirror", "wrap"))),
    ((2, 3, 4), dict(size=(5, 7), axes=(0, 2), mode=("nearest", "reflect"), origin=(2, 0))),
    ((3, 4), dict(size=(1, 9), mode="constant", cval=-2.0)),
]

EVERY_MODE_ARGS = {"gaussian_filter": {"sigma": 1.3}, "uniform_filter": {"size": 4}}


def tensor(rng, shape, device, dtype="float64", requires_grad=True):
    data = random_array(rng, shape, dtype)
    return torch.tensor(data, device=device, requires_grad=requires_grad)


def host(t):
    return t.detach().cpu().numpy()


def check_correlate1d(rng, device, mode, case):
    shape, axis, taps, origin = case
    x = tensor(rng, shape, device)
    w = tensor(rng, (taps,), device)

    def f(x, w):
        return gt.correlate1d(x, w, axis, mode=mode, cval=0.7, origin=origin)
    assert gradcheck(f, (x, w))
    expected = scipy_reference("correlate1d", host(x), host(w), axis, mode=mode, cval=0.7,
                               origin=origin)
    assert_matches(host(f(x, w)), expected)


def check_uniform_filter1d(rng, device, mode, case):
    shape, axis, size, origin = case
    x = tensor(rng, shape, device)

    def f(x):
        return gt.uniform_filter1d(x, size, axis, mode=mode, cval=-1.5, origin=origin)
    assert gradcheck(f, (x,))
    expected = scipy_reference("uniform_filter1d", host(x), size, axis, mode=mode, cval=-1.5,
                               origin=origin)
    assert_matches(host(f(x)), expected)


def check_gaussian_filter1d(rng, device, mode, order):
    x = tensor(rng, (3, 6), device)

    def f(x):
        return gt.gaussian_filter1d(x, 1.4, 1, order, mode=mode, cval=0.3, truncate=3.0)
    assert gradcheck(f, (x,))
    expected = scipy_reference("gaussian_filter1d", host(x), 1.4, 1, order, mode=mode, cval=0.3,
                               truncate=3.0)
    assert_matches(host(f(x)), expected)


def check_filter(rng, device, name, shape, kwargs):
    """gradcheck of gaussian_filter or uniform_filter, and parity with scipy."""
    kwargs = dict(kwargs)
    first = kwargs.pop("sigma" if name == "gaussian_filter" else "size")
    x = tensor(rng, shape, device)

    def f(x):
        return getattr(gt, name)(x, first, **kwargs)
    assert gradcheck(f, (x,))
    assert_matches(host(f(x)), scipy_reference(name, host(x), first, **kwargs))


def check_non_contiguous(rng, device):
    """A strided view in, a transposed result out (non-contiguous gradient)."""
    base = tensor(rng, (6, 9), device)

    def f(base):
        return gt.gaussian_filter(base.t()[::2], (1.0, 0.6), mode=("mirror", "wrap")).t()
    assert gradcheck(f, (base,))
    view = base.detach().t()[::2]
    expected = gnd.gaussian_filter(view, (1.0, 0.6), mode=("mirror", "wrap")).t()
    assert torch.equal(f(base).detach(), expected)


def check_forward_identical_to_ndimage(rng, device, name, args, kwargs):
    x = tensor(rng, (5, 6, 4), device, dtype="float32")
    got = getattr(gt, name)(x, *args, **kwargs)
    assert got.requires_grad and got.device == x.device and got.dtype == x.dtype
    assert torch.equal(got.detach(), getattr(gnd, name)(x.detach(), *args, **kwargs))


def jacobian_transpose_product(name, x, g, *args, **kwargs):
    """J^T g of scipy's linear filter (cval 0 for constant modes), one basis
    vector at a time: an oracle for the gradient independent of gpufilt."""
    x = np.asarray(x)
    grad = np.zeros(x.size)
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = 1.0
        grad[j] = np.vdot(scipy_reference(name, e.reshape(x.shape), *args, **kwargs), g)
    return grad.reshape(x.shape)


def check_gradient_against_scipy_jacobian(rng, device, name, args, kwargs):
    x = tensor(rng, (4, 5), device)
    g = random_array(rng, (4, 5), "float64")
    y = getattr(gt, name)(x, *args, **kwargs)
    (grad,) = torch.autograd.grad(y, x, torch.tensor(g, device=device))
    expected = jacobian_transpose_product(name, host(x), g, *args, **kwargs)
    assert_matches(host(grad), expected)


def check_sum_backward(rng, device):
    """y.sum().backward() hands backward an expanded (stride 0) gradient."""
    x = tensor(rng, (5, 7), device)
    gt.correlate1d(x, [2.5], 0).sum().backward()
    assert torch.equal(x.grad, torch.full_like(x, 2.5))
    x.grad = None
    gt.uniform_filter(x, 3, mode="wrap").sum().backward()  # wrap keeps the total
    assert torch.allclose(x.grad, torch.ones_like(x), rtol=0, atol=1e-14)


# ----------------------------------------------------------------- nn ops

NN_SHAPES = [(7,), (4, 5), (2, 3, 4)]


def check_nn_gradcheck(rng, device, name, shape, axis):
    x = tensor(rng, shape, device)
    if name in ("relu", "sigmoid"):
        assert gradcheck(getattr(gt, name), (x,))
    else:
        assert gradcheck(lambda x: getattr(gt, name)(x, axis), (x,))


def nn_call(name, x, axis=-1, library=gt):
    """gpufilt.torch's (or torch's) op `name` on x, along `axis` for the softmaxes."""
    if name in ("relu", "sigmoid"):
        return getattr(library, name)(x)
    return getattr(library, name)(x, axis)


def check_nn_forward(rng, device, name, shape, axis, dtype):
    x = tensor(rng, shape, device, dtype=dtype)
    got = nn_call(name, x, axis)
    expected = nn_call(name, x, axis, library=torch).detach()
    assert got.dtype == x.dtype and got.device == x.device and got.requires_grad
    assert_matches(host(got), host(expected))


def labels_for(rng, n, classes, device, one_hot):
    index = torch.tensor(rng.integers(0, classes, n), device=device)
    if one_hot:
        return torch.nn.functional.one_hot(index, classes).to(torch.float64)
    return index


def check_cross_entropy_class_axis_1(rng, device):
    """torch's (N, C, d) layout: classes along axis 1."""
    logits = tensor(rng, (3, 4, 2), device)
    labels = torch.tensor(rng.integers(0, 4, (3, 2)), device=device)
    assert gradcheck(lambda z: gt.softmax_cross_entropy(z, labels, axis=1), (logits,))
    expected = torch.nn.functional.cross_entropy(logits, labels)
    assert_matches(host(gt.softmax_cross_entropy(logits, labels, axis=1)), host(expected))


def check_cross_entropy(rng, device, one_hot):
    logits = tensor(rng, (6, 5), device) * 10  # large logits: the stable path
    logits = logits.detach().requires_grad_(True)
    labels = labels_for(rng, 6, 5, device, one_hot)
    assert gradcheck(lambda z: gt.softmax_cross_entropy(z, labels), (logits,))
    loss = gt.softmax_cross_entropy(logits, labels)
    expected = torch.nn.functional.cross_entropy(logits, labels)
    assert loss.shape == () and loss.device == logits.device
    assert_matches(host(loss), host(expected))
    (grad,) = torch.autograd.grad(loss * 3.0, logits)
    (expected_grad,) = torch.autograd.grad(expected * 3.0, logits)
    assert_matches(host(grad), host(expected_grad))
