"""PyTorch autograd for gpufilt's filters and neural-network ops.

``torch.autograd.Function``s, and plain functions that apply them, for

- the filters ``correlate1d``, ``convolve1d``, ``gaussian_filter1d``,
  ``gaussian_filter``, ``uniform_filter1d`` and ``uniform_filter``, with
  scipy.ndimage's signatures (``output`` must stay None: autograd needs a new
  tensor) and exact gradients for every boundary mode;
- ``relu``, ``sigmoid``, ``softmax``, ``log_softmax`` and
  ``softmax_cross_entropy``, on gpufilt.ops' kernels.

Forward results are those of gpufilt.ndimage / gpufilt.ops (the same
kernels, on the same stream: torch's current one). Tensors stay on their
device; nothing goes through the host except a ``weights`` tensor of
``correlate1d`` (its taps are kernel arguments, passed by value).

Gradients of the filters are the adjoint of the forward map, boundary
extension included. A 1-D pass computes y[i] = sum_k w[k] x[b(i + k - c)],
with b the mode's border index (src/core/border.hpp; -1 reads cval) and c
the filter's centre, so dL/dx[j] = sum of w[k] g[i] over the (i, k) whose
b(i + k - c) is j. The backward pass correlates the zero-padded gradient with
the reversed taps over every extended position p (gpufilt's own kernels,
mode 'constant') and folds each p back onto b(p) with ``index_add_`` (on
CUDA, index_add_ accumulates with atomics: where two or more outside
positions fold onto one element the summation order, hence the last bits, may vary
from run to run unless ``torch.use_deterministic_algorithms(True)``). Multi-axis filters apply the
1-D adjoints in reverse order. The output's affine dependence on ``cval`` has
no gradient (cval is a Python number).

Double backward is not supported: the backward passes are marked
``once_differentiable`` and differentiating them raises torch's error.

torch is an optional dependency, imported only by this module.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.autograd.function import once_differentiable

from . import _args, _docs, ndimage, ops
from ._dispatch import Operand

__all__ = [
    "correlate1d", "convolve1d", "gaussian_filter1d", "gaussian_filter",
    "uniform_filter1d", "uniform_filter",
    "relu", "sigmoid", "softmax", "log_softmax", "softmax_cross_entropy",
    "SeparableFilter", "ReLU", "Sigmoid", "Softmax", "LogSoftmax", "SoftmaxCrossEntropy",
]

_NEAREST, _WRAP, _REFLECT, _MIRROR, _CONSTANT = (
    _args.MODES[m] for m in ("nearest", "wrap", "reflect", "mirror", "constant"))


# ------------------------------------------------------- boundary extension

def border_index(i, n: int, mode: int):
    """src/core/border.hpp's border_index on an int64 tensor of positions:
    the index in [0, n) each position reads, or -1 (cval) for 'constant'.
    Extensions longer than the axis repeat the pattern, as in the kernels."""
    if mode == _NEAREST:
        return i.clamp(0, n - 1)
    if mode == _WRAP:
        return torch.remainder(i, n)  # floor modulo, as floor_mod
    if mode == _REFLECT:  # d c b a | a b c d | d c b a
        r = torch.remainder(i, 2 * n)
        return torch.where(r < n, r, 2 * n - 1 - r)
    if mode == _MIRROR:  # d c b | a b c d | c b a
        if n == 1:
            return torch.zeros_like(i)
        r = torch.remainder(i, 2 * n - 2)
        return torch.where(r < n, r, 2 * n - 2 - r)
    return torch.where((i >= 0) & (i < n), i, -1)


def _fold(z, axis, n, centre, mode):
    """Adds each extended position of `z` (along `axis`; position p at
    p + centre) into the element it reads: the adjoint of the boundary
    extension. Inside positions read themselves; only the taps - 1 outside
    ones go through index_add_ (few indices: few atomics on CUDA)."""
    inside = z.narrow(axis, centre, n)
    if mode == _CONSTANT:  # outside positions read cval: they carry no gradient
        return inside
    after = z.shape[axis] - centre - n
    device = z.device
    outside = torch.cat([torch.arange(-centre, 0, device=device),
                         torch.arange(n, n + after, device=device)])
    edges = torch.cat([z.narrow(axis, 0, centre), z.narrow(axis, centre + n, after)], axis)
    return inside.clone().index_add_(axis, border_index(outside, n, mode), edges)


def _extend(x, axis, taps, centre, mode, cval):
    """x read at every extended position of a pass (cval outside for 'constant')."""
    n = x.shape[axis]
    positions = torch.arange(-centre, n + taps - 1 - centre, device=x.device)
    index = border_index(positions, n, mode)
    extended = x.index_select(axis, index.clamp(min=0))
    if mode != _CONSTANT:
        return extended
    inside = (index >= 0).reshape([-1 if ax == axis else 1 for ax in range(x.ndim)])
    return torch.where(inside, extended, cval)


# ------------------------------------------------------------- 1-D passes
# A pass is ndimage's tuple (axis, kind, weights, size, origin, mode code),
# kind 'correlate' (weights: the correlation taps) or 'uniform' (a box of size).

def _taps(p):
    axis, kind, weights, size, origin, mode = p
    return len(weights) if kind == "correlate" else size


def _centre(p):
    return _taps(p) // 2 + p[4]


def _run_passes(x, passes, cval=0.0):
    """The passes on tensor x (no grad) with gpufilt.ndimage's kernels."""
    src = Operand(x.detach(), "input")
    return ndimage._separable(src, passes, None, cval, src.dtype.kind == "c")


def _adjoint_pass(g, p):
    """dL/dx of one pass from g = dL/dy: the padded gradient correlated with
    the reversed taps in mode 'constant' (cval 0), then folded back."""
    axis, kind, weights, size, origin, mode = p
    taps, n = _taps(p), g.shape[axis]
    if g.numel() == 0:
        return g
    if taps > 1:
        pad = list(g.shape)
        pad[axis] = taps - 1
        g = torch.cat([g, g.new_zeros(pad)], axis)
    # Centre taps - 1: output position q sums g[q - k] w[k], i.e. the extended
    # position q - centre of the forward pass.
    reversed_weights = list(weights)[::-1] if kind == "correlate" else weights
    adjoint = (axis, kind, reversed_weights, size, (taps - 1) - taps // 2, _CONSTANT)
    z = _run_passes(g, [adjoint])
    return _fold(z, axis, n, _centre(p), mode)


def _weights_grad(x, g, p, cval):
    """dL/dw[k] = sum_i g[i] x_ext[i + k] over every line, for a 'correlate' pass."""
    axis, taps = p[0], _taps(p)
    n = x.shape[axis]
    if x.numel() == 0:
        return torch.zeros(taps, dtype=x.real.dtype, device=x.device)
    x_ext = _extend(x, axis, taps, _centre(p), p[5], cval)
    if x_ext.is_complex():  # real taps of a complex map: Re(g conj(x)), as torch's mul
        x_ext = x_ext.conj()
    sums = [(g * x_ext.narrow(axis, k, n)).sum() for k in range(taps)]
    dw = torch.stack(sums)
    return dw.real if dw.is_complex() else dw


class SeparableFilter(torch.autograd.Function):
    """A chain of gpufilt's 1-D passes (ndimage's pass tuples) on `input`.

    ``SeparableFilter.apply(input, weights, passes, cval)``: `weights` is
    None, or the tensor whose values are the taps of the single
    'correlate' pass (it then gets a gradient too)."""

    @staticmethod
    def forward(ctx, input, weights, passes, cval):
        ctx.passes, ctx.cval = passes, cval
        if ctx.needs_input_grad[1]:
            ctx.save_for_backward(input)
            ctx.weights_device = weights.device  # input and weights may live apart
        return _run_passes(input, passes, cval)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        grad_input = grad_weights = None
        if ctx.needs_input_grad[0]:
            grad_input = grad
            for p in reversed(ctx.passes):
                grad_input = _adjoint_pass(grad_input, p)
        if ctx.needs_input_grad[1]:
            (input,) = ctx.saved_tensors
            grad_weights = _weights_grad(input, grad, ctx.passes[0], ctx.cval)
            grad_weights = grad_weights.to(ctx.weights_device)
        return grad_input, grad_weights, None, None


# ---------------------------------------------------------------- filters

def _check_tensor(x, name="input"):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(x).__name__}; "
                        "gpufilt.ndimage and gpufilt.ops take any other array")


def _check_call(input, output, cval):
    _check_tensor(input)
    if output is not None:
        raise ValueError("output= is not supported by gpufilt.torch: autograd needs a new tensor "
                         "(use gpufilt.ndimage to write into an existing one)")
    if isinstance(cval, torch.Tensor):
        raise TypeError("cval must be a Python number (it gets no gradient), not a tensor")
    return _args.check_cval(cval, ndimage._filter_input(input.detach()).dtype)  # refuses bfloat16


def _filter(input, passes, cval, weights=None):
    return SeparableFilter.apply(input, weights, passes, cval)


def _weights_taps(weights):
    """(host taps for the kernel, the tensor to differentiate or None)."""
    if isinstance(weights, torch.Tensor):
        if weights.is_complex():
            raise TypeError("complex weights are not supported by gpufilt.torch")
        # The kernels take taps by value: a CUDA weights tensor is read back here.
        taps = ndimage._as_weights(weights.detach().cpu().numpy(), ndim=1)
        return taps, (weights if weights.requires_grad else None)
    taps = ndimage._as_weights(weights, ndim=1)
    if taps.dtype.kind == "c":
        raise TypeError("complex weights are not supported by gpufilt.torch")
    return taps, None


@_docs.numpy_sections(
    [('input : torch.Tensor', 'A floating-point CPU or CUDA tensor; gradients flow back to it.'), ('weights : sequence or torch.Tensor', 'The taps; a tensor that requires grad gets a gradient too.'), ('**other parameters**', "As gpufilt.ndimage's filter of the same name; output= is refused (autograd needs a new tensor).")],
    ('result : torch.Tensor', "A new tensor on the input's device, recorded for autograd."), """
    >>> import torch
    >>> from gpufilt import torch as gt
    >>> x = torch.arange(5.0, requires_grad=True)
    >>> y = gt.correlate1d(x, [1.0, 2.0, 1.0])
    >>> y.sum().backward()
    >>> x.grad
    tensor([4., 4., 4., 4., 4.])
    """)
def correlate1d(input: torch.Tensor, weights: Sequence[float] | torch.Tensor, axis: int = -1,
                output: None = None, mode: str | Sequence[str] = "reflect", cval: float = 0.0,
                origin: int | Sequence[int] = 0) -> torch.Tensor:
    """scipy.ndimage.correlate1d, differentiable in `input` and in `weights`
    (when it is a tensor that requires grad)."""
    cval = _check_call(input, output, cval)
    taps, tensor = _weights_taps(weights)
    axis = _args.check_axis(axis, input.ndim)
    origin = _args.check_origin(origin, len(taps))
    return _filter(input, [ndimage._correlate_pass(axis, taps.tolist(), origin, mode)], cval,
                   tensor)


@_docs.numpy_sections(
    [('input : torch.Tensor', 'A floating-point CPU or CUDA tensor; gradients flow back to it.'), ('weights : sequence or torch.Tensor', 'The taps; a tensor that requires grad gets a gradient too.'), ('**other parameters**', "As gpufilt.ndimage's filter of the same name; output= is refused (autograd needs a new tensor).")],
    ('result : torch.Tensor', "A new tensor on the input's device, recorded for autograd."), """
    >>> import torch
    >>> from gpufilt import torch as gt
    >>> w = torch.tensor([1.0, -1.0], requires_grad=True)
    >>> gt.convolve1d(torch.arange(4.0), w).sum().backward()
    >>> w.grad
    tensor([9., 6.])
    """)
def convolve1d(input: torch.Tensor, weights: Sequence[float] | torch.Tensor, axis: int = -1,
               output: None = None, mode: str | Sequence[str] = "reflect", cval: float = 0.0,
               origin: int | Sequence[int] = 0) -> torch.Tensor:
    """scipy.ndimage.convolve1d, differentiable in `input` and in `weights`."""
    taps, _ = _weights_taps(weights)  # checks the weights before they are flipped
    flipped = weights.flip(0) if isinstance(weights, torch.Tensor) else taps[::-1]
    origin = -_args.check_origin(origin, len(flipped)) - (1 - len(flipped) % 2)
    return correlate1d(input, flipped, axis, output, mode, cval, origin)


@_docs.numpy_sections(
    [('input : torch.Tensor', 'A floating-point CPU or CUDA tensor; gradients flow back to it.'), ('sigma : float', 'Standard deviation of the Gaussian.'), ('**other parameters**', "As gpufilt.ndimage's filter of the same name; output= is refused (autograd needs a new tensor).")],
    ('result : torch.Tensor', "A new tensor on the input's device, recorded for autograd."), """
    >>> import torch
    >>> from gpufilt import torch as gt
    >>> x = torch.zeros(5, requires_grad=True)
    >>> gt.gaussian_filter1d(x, 1.0).sum().backward()
    >>> torch.allclose(x.grad, torch.ones(5))
    True
    """)
def gaussian_filter1d(input: torch.Tensor, sigma: float | Sequence[float], axis: int = -1,
                      order: int | Sequence[int] = 0, output: None = None,
                      mode: str | Sequence[str] = "reflect", cval: float = 0.0, truncate: float = 4.0, *,
                      radius: int | Sequence[int] | None = None) -> torch.Tensor:
    """scipy.ndimage.gaussian_filter1d, differentiable in `input`."""
    cval = _check_call(input, output, cval)
    axis = _args.check_axis(axis, input.ndim)
    return _filter(input, [ndimage._gaussian_pass(axis, sigma, order, mode, truncate, radius)],
                   cval)


@_docs.numpy_sections(
    [('input : torch.Tensor', 'A floating-point CPU or CUDA tensor; gradients flow back to it.'), ('sigma : float or sequence of floats', 'Standard deviation of the Gaussian, per axis.'), ('**other parameters**', "As gpufilt.ndimage's filter of the same name; output= is refused (autograd needs a new tensor).")],
    ('result : torch.Tensor', "A new tensor on the input's device, recorded for autograd."), """
    >>> import torch
    >>> from gpufilt import torch as gt
    >>> x = torch.rand(8, 8, requires_grad=True)
    >>> loss = gt.gaussian_filter(x, 2.0, mode="mirror").square().sum()
    >>> loss.backward()
    >>> x.grad.shape
    torch.Size([8, 8])
    """)
def gaussian_filter(input: torch.Tensor, sigma: float | Sequence[float], order: int | Sequence[int] = 0,
                    output: None = None, mode: str | Sequence[str] = "reflect", cval: float = 0.0,
                    truncate: float = 4.0, *, radius: int | Sequence[int] | None = None,
                    axes: int | Sequence[int] | None = None) -> torch.Tensor:
    """scipy.ndimage.gaussian_filter, differentiable in `input`."""
    cval = _check_call(input, output, cval)
    passes = ndimage._gaussian_passes(input.ndim, sigma, order, mode, truncate, radius, axes)
    return _filter(input, passes, cval)


@_docs.numpy_sections(
    [('input : torch.Tensor', 'A floating-point CPU or CUDA tensor; gradients flow back to it.'), ('size : int', 'Length of the window.'), ('**other parameters**', "As gpufilt.ndimage's filter of the same name; output= is refused (autograd needs a new tensor).")],
    ('result : torch.Tensor', "A new tensor on the input's device, recorded for autograd."), """
    >>> import torch
    >>> from gpufilt import torch as gt
    >>> x = torch.zeros(4, requires_grad=True)
    >>> gt.uniform_filter1d(x, 3, mode="constant").sum().backward()
    >>> x.grad
    tensor([0.6667, 1.0000, 1.0000, 0.6667])
    """)
def uniform_filter1d(input: torch.Tensor, size: int | Sequence[int], axis: int = -1, output: None = None,
                     mode: str | Sequence[str] = "reflect", cval: float = 0.0,
                     origin: int | Sequence[int] = 0) -> torch.Tensor:
    """scipy.ndimage.uniform_filter1d, differentiable in `input`."""
    cval = _check_call(input, output, cval)
    axis = _args.check_axis(axis, input.ndim)
    return _filter(input, [ndimage._uniform_pass(axis, size, origin, mode)], cval)


@_docs.numpy_sections(
    [('input : torch.Tensor', 'A floating-point CPU or CUDA tensor; gradients flow back to it.'), ('size : int or sequence of ints', 'Length of the box along each axis.'), ('**other parameters**', "As gpufilt.ndimage's filter of the same name; output= is refused (autograd needs a new tensor).")],
    ('result : torch.Tensor', "A new tensor on the input's device, recorded for autograd."), """
    >>> import torch
    >>> from gpufilt import torch as gt
    >>> x = torch.zeros(3, 3, requires_grad=True)
    >>> gt.uniform_filter(x, 3).sum().backward()
    >>> x.grad
    tensor([[1., 1., 1.],
            [1., 1., 1.],
            [1., 1., 1.]])
    """)
def uniform_filter(input: torch.Tensor, size: int | Sequence[int] = 3, output: None = None,
                   mode: str | Sequence[str] = "reflect", cval: float = 0.0, origin: int | Sequence[int] = 0,
                   *, axes: int | Sequence[int] | None = None) -> torch.Tensor:
    """scipy.ndimage.uniform_filter, differentiable in `input`."""
    cval = _check_call(input, output, cval)
    passes = ndimage._uniform_passes(input.ndim, size, origin, mode, axes)
    return _filter(input, passes, cval)


# ------------------------------------------------------ neural-network ops
# The backward compositions of softmax and log_softmax are a product, a sum
# over one axis and a difference: torch's own kernels do them on the same
# device and stream, with broadcasting, and gpufilt.ops has no fused kernel
# for them; the heavy passes (forward, relu/sigmoid/cross-entropy gradients)
# are gpufilt's.

class ReLU(torch.autograd.Function):
    """max(x, 0) with gpufilt.ops.relu; backward gpufilt.ops.relu_grad."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ops.relu(x.detach())

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return ops.relu_grad(x.detach(), grad)


class Sigmoid(torch.autograd.Function):
    """1 / (1 + exp(-x)) with gpufilt.ops.sigmoid; backward from the output
    with gpufilt.ops.sigmoid_grad."""

    @staticmethod
    def forward(ctx, x):
        y = ops.sigmoid(x.detach())
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return ops.sigmoid_grad(y.detach(), grad)


class Softmax(torch.autograd.Function):
    """softmax along `axis` with gpufilt.ops.softmax;
    backward y * (g - sum(g * y, axis))."""

    @staticmethod
    def forward(ctx, x, axis):
        y = ops.softmax(x.detach(), axis=axis)
        ctx.axis = axis
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return y * (grad - (grad * y).sum(ctx.axis, keepdim=True)), None


class LogSoftmax(torch.autograd.Function):
    """log_softmax along `axis` with gpufilt.ops.log_softmax;
    backward g - exp(y) * sum(g, axis)."""

    @staticmethod
    def forward(ctx, x, axis):
        y = ops.log_softmax(x.detach(), axis=axis)
        ctx.axis = axis
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad - y.exp() * grad.sum(ctx.axis, keepdim=True), None


class SoftmaxCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of softmax(logits) along `axis` against labels
    (class indices or probabilities) with gpufilt.ops' fused kernels;
    differentiable in the logits only."""

    @staticmethod
    def forward(ctx, logits, labels, axis):
        ctx.axis = axis
        ctx.save_for_backward(logits, labels)
        return ops.softmax_cross_entropy(logits.detach(), labels.detach(), axis)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        logits, labels = ctx.saved_tensors
        # grad, a 0-d tensor on the device, is read by the kernel: no host wait.
        return ops.softmax_cross_entropy_grad(logits.detach(), labels.detach(), grad,
                                              axis=ctx.axis), None, None


@_docs.numpy_sections(
    [('input : torch.Tensor', 'A floating-point CPU or CUDA tensor.')],
    ('result : torch.Tensor', "A new tensor on the input's device, recorded for autograd."), """
    >>> import torch
    >>> from gpufilt import torch as gt
    >>> x = torch.tensor([-1.0, 2.0], requires_grad=True)
    >>> gt.relu(x).sum().backward()
    >>> x.grad
    tensor([0., 1.])
    """)
def relu(input: torch.Tensor) -> torch.Tensor:
    """gpufilt.ops.relu, differentiable."""
    _check_tensor(input)
    return ReLU.apply(input)


@_docs.numpy_sections(
    [('input : torch.Tensor', 'A floating-point CPU or CUDA tensor.')],
    ('result : torch.Tensor', "A new tensor on the input's device, recorded for autograd."), """
    >>> import torch
    >>> from gpufilt import torch as gt
    >>> x = torch.zeros(2, requires_grad=True)
    >>> gt.sigmoid(x).sum().backward()
    >>> x.grad
    tensor([0.2500, 0.2500])
    """)
def sigmoid(input: torch.Tensor) -> torch.Tensor:
    """gpufilt.ops.sigmoid, differentiable."""
    _check_tensor(input)
    return Sigmoid.apply(input)


@_docs.numpy_sections(
    [('input : torch.Tensor', 'A floating-point CPU or CUDA tensor.'), ('axis : int, optional', 'The axis normalised; default -1.')],
    ('result : torch.Tensor', "A new tensor on the input's device, recorded for autograd."), """
    >>> import torch
    >>> from gpufilt import torch as gt
    >>> x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> gt.softmax(x)[2].backward()
    >>> x.grad
    tensor([-0.0599, -0.1628,  0.2227])
    """)
def softmax(input: torch.Tensor, axis: int = -1) -> torch.Tensor:
    """gpufilt.ops.softmax along `axis`, differentiable."""
    _check_tensor(input)
    return Softmax.apply(input, _args.check_axis(axis, input.ndim))


@_docs.numpy_sections(
    [('input : torch.Tensor', 'A floating-point CPU or CUDA tensor.'), ('axis : int, optional', 'The axis normalised; default -1.')],
    ('result : torch.Tensor', "A new tensor on the input's device, recorded for autograd."), """
    >>> import torch
    >>> from gpufilt import torch as gt
    >>> x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> gt.log_softmax(x)[2].backward()
    >>> x.grad
    tensor([-0.0900, -0.2447,  0.3348])
    """)
def log_softmax(input: torch.Tensor, axis: int = -1) -> torch.Tensor:
    """gpufilt.ops.log_softmax along `axis`, differentiable."""
    _check_tensor(input)
    return LogSoftmax.apply(input, _args.check_axis(axis, input.ndim))


@_docs.numpy_sections(
    [('logits : torch.Tensor', 'Floating-point scores, classes along axis.'), ('labels : torch.Tensor', 'Class indices or probabilities; no gradient.'), ('axis : int, optional', 'The class axis; default -1.')],
    ('loss : torch.Tensor', 'The mean loss, 0-d, recorded for autograd.'), """
    >>> import torch
    >>> from gpufilt import torch as gt
    >>> logits = torch.zeros(2, 3, requires_grad=True)
    >>> gt.softmax_cross_entropy(logits, torch.tensor([0, 2])).backward()
    >>> logits.grad
    tensor([[-0.3333,  0.1667,  0.1667],
            [ 0.1667,  0.1667, -0.3333]])
    """)
def softmax_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, axis: int = -1) -> torch.Tensor:
    """gpufilt.ops.softmax_cross_entropy (mean loss, a 0-d tensor; classes
    along `axis`), differentiable in `logits`; `labels` (class indices or
    probabilities) get no gradient."""
    _check_tensor(logits, "logits")
    _check_tensor(labels, "labels")
    if labels.requires_grad and torch.is_grad_enabled():
        raise ValueError("labels require grad, but softmax_cross_entropy is differentiable in the "
                         "logits only: pass labels.detach()")
    return SoftmaxCrossEntropy.apply(logits, labels, axis)
