"""scipy.ndimage's filters, drop-in, on CPU and CUDA arrays.

Signatures and results follow scipy.ndimage (SciPy 1.17); inputs may be any
array gpufilt can import (numpy, cupy, torch, jax, numba, plain buffers) and
results come back in the caller's library, on the input's device. GPU calls
also take ``stream=`` (an int, or a cupy/torch stream).
"""
from __future__ import annotations

import numpy as np

from . import _args
from ._dispatch import Operand, _is_dtype_like, output_dtype_of, run_separable

__all__ = [
    "correlate1d", "convolve1d", "gaussian_filter1d", "gaussian_filter",
    "uniform_filter1d", "uniform_filter",
]


# ------------------------------------------------------------------ helpers

def _separable(src, passes, output, cval, complex_output=False, stream=None):
    """Runs the 1-D passes with scipy's output rules (dtype, complex promotion)."""
    _args.check_cval(cval, src.dtype)
    if output is not None and _is_dtype_like(output):
        output = _args.result_dtype(output_dtype_of(output), src.dtype, complex_output)
    default = _args.result_dtype(None, src.dtype, complex_output)
    return run_separable(src, output, passes, cval, default, stream)


def _correlate_pass(axis, weights, origin, mode):
    return (axis, "correlate", weights, 1, origin, _args.mode_code(mode))


def _real_weights(weights):
    w = np.asarray(weights)
    if w.dtype.kind == "c":
        raise NotImplementedError("complex weights are not supported yet; filter the real and "
                                  "imaginary parts of the weights separately")
    try:
        w = np.asarray(w, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"weights must be real numbers, got dtype {w.dtype}") from None
    if w.ndim != 1 or w.shape[0] < 1:
        raise ValueError(f"weights must be a non-empty 1-D sequence, got shape {w.shape}")
    return w


def gaussian_kernel1d(sigma: float, order: int, radius: int) -> np.ndarray:
    """Taps of a Gaussian (or its `order`-th derivative) at -radius..radius,
    normalised as scipy.ndimage does. Convolution order: reverse to correlate."""
    x = np.arange(-radius, radius + 1)
    if sigma == 0:  # the limit of a vanishing Gaussian: identity, derivatives vanish
        return (x == 0).astype(np.float64) if order == 0 else np.zeros(len(x))
    sigma2 = sigma * sigma
    phi = np.exp(-0.5 / sigma2 * x ** 2)
    phi /= phi.sum()
    if order == 0:
        return phi
    # d/dx (q(x) phi(x)) = (q'(x) - x q(x) / sigma^2) phi(x): iterate on q's coefficients.
    q = np.zeros(order + 1)
    q[0] = 1
    powers = np.arange(order + 1)
    for _ in range(order):
        q = np.append(q[1:] * powers[1:], 0.0) - np.concatenate(([0.0], q[:-1])) / sigma2
    return (x[:, None] ** powers).dot(q) * phi


def _gaussian_pass(axis, sigma, order, mode, truncate, radius):
    sigma = _args.check_sigma(sigma)
    order = _args.check_order(order)
    if radius is None:
        radius = int(float(truncate) * sigma + 0.5)
    if not isinstance(radius, (int, np.integer)) or radius < 0:
        raise ValueError(f"radius must be a non-negative integer, got {radius!r}")
    weights = gaussian_kernel1d(sigma, order, int(radius))[::-1]
    return _correlate_pass(axis, weights.tolist(), 0, mode)


# ------------------------------------------------------------------ filters

def correlate1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0,
                *, stream=None):
    """Calculate a 1-D correlation along the given axis (scipy.ndimage.correlate1d)."""
    src = Operand(input)
    w = _real_weights(weights)
    axis = _args.check_axis(axis, src.ndim)
    origin = _args.check_origin(origin, len(w))
    passes = [_correlate_pass(axis, w.tolist(), origin, mode)]
    return _separable(src, passes, output, cval, stream=stream)


def convolve1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0,
               *, stream=None):
    """Calculate a 1-D convolution along the given axis (scipy.ndimage.convolve1d)."""
    w = _real_weights(weights)[::-1]
    origin = -_args.check_origin(origin, len(w)) - (1 - len(w) % 2)
    return correlate1d(input, w, axis, output, mode, cval, origin, stream=stream)


def gaussian_filter1d(input, sigma, axis=-1, order=0, output=None, mode="reflect", cval=0.0,
                      truncate=4.0, *, radius=None, stream=None):
    """1-D Gaussian filter (scipy.ndimage.gaussian_filter1d)."""
    src = Operand(input)
    axis = _args.check_axis(axis, src.ndim)
    passes = [_gaussian_pass(axis, sigma, order, mode, truncate, radius)]
    return _separable(src, passes, output, cval, src.dtype.kind == "c", stream)


def gaussian_filter(input, sigma, order=0, output=None, mode="reflect", cval=0.0, truncate=4.0,
                    *, radius=None, axes=None, stream=None):
    """Multidimensional Gaussian filter (scipy.ndimage.gaussian_filter)."""
    src = Operand(input)
    axes = _args.check_axes(axes, src.ndim)
    n = len(axes)
    sigmas = _args.normalize_sequence(sigma, n, "sigma")
    orders = _args.normalize_sequence(order, n, "order")
    modes = _args.normalize_sequence(mode, n, "mode")
    radii = _args.normalize_sequence(radius, n, "radius")
    passes = [_gaussian_pass(ax, s, o, m, truncate, r)
              for ax, s, o, m, r in zip(axes, sigmas, orders, modes, radii)
              if _args.check_sigma(s) > 1e-15]
    return _separable(src, passes, output, cval, src.dtype.kind == "c", stream)


def _uniform_pass(axis, size, origin, mode):
    size = _args.check_size(size)
    origin = _args.check_origin(origin, size)
    return (axis, "uniform", (), size, origin, _args.mode_code(mode))


def uniform_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0,
                     *, stream=None):
    """1-D uniform (box) filter (scipy.ndimage.uniform_filter1d)."""
    src = Operand(input)
    axis = _args.check_axis(axis, src.ndim)
    passes = [_uniform_pass(axis, size, origin, mode)]
    return _separable(src, passes, output, cval, src.dtype.kind == "c", stream)


def uniform_filter(input, size=3, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None,
                   stream=None):
    """Multidimensional uniform (box) filter (scipy.ndimage.uniform_filter)."""
    src = Operand(input)
    axes = _args.check_axes(axes, src.ndim)
    n = len(axes)
    sizes = _args.normalize_sequence(size, n, "size")
    origins = _args.normalize_sequence(origin, n, "origin")
    modes = _args.normalize_sequence(mode, n, "mode")
    passes = [_uniform_pass(ax, s, o, m) for ax, s, o, m in zip(axes, sizes, origins, modes)
              if _args.check_size(s) > 1]
    return _separable(src, passes, output, cval, src.dtype.kind == "c", stream)
