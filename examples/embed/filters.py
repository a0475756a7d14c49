"""Filters the embed example (main.cpp) calls on its C++ buffers.

Each class has ``apply_filter(image, out=None)``: a 3x3x3 mean with
'nearest' borders (edge voxels repeated). ``image`` and ``out`` are
gpufilt.ExternalArray objects wrapping C++ memory; the filter returns the
result as an array of its own library (numpy, cupy), or ``out`` itself when
given, which it writes in place.
"""
import numpy as np

import gpufilt.ndimage


def _mean3(xp, x):
    """3x3x3 'nearest' mean of a 3-D array with the array module xp."""
    padded = xp.pad(x, 1, mode="edge")
    total = xp.zeros(x.shape, dtype=x.dtype)
    nz, ny, nx = x.shape
    for dz in range(3):
        for dy in range(3):
            for dx in range(3):
                total += padded[dz:dz + nz, dy:dy + ny, dx:dx + nx]
    return total / x.dtype.type(27)


class NumpyFilter:
    """numpy on host memory: np.asarray views the C++ buffer, no copy."""

    def apply_filter(self, image, out=None):
        result = _mean3(np, np.asarray(image))
        if out is None:
            return result
        np.asarray(out)[...] = result
        return out


class CupyFilter:
    """cupy on device memory: cupy.asarray reads __cuda_array_interface__."""

    def apply_filter(self, image, out=None):
        import cupy
        result = _mean3(cupy, cupy.asarray(image))
        if out is None:
            return result
        cupy.asarray(out)[...] = result
        return out


class GpufiltFilter:
    """gpufilt itself, on host or device memory, straight from the wrapper."""

    def apply_filter(self, image, out=None):
        return gpufilt.ndimage.uniform_filter(image, 3, mode="nearest", output=out)
