"""generic_filter and generic_filter1d with the caller's function, against
the peers on the same arrays (issue 34):

- CPU (default): a numba cfunc (window mean) through gpufilt and the same
  function as a scipy.LowLevelCallable through scipy, on a 1024^2 float64
  image, 3x3 and 5x5 boxes, gpufilt on 1, 2 and all threads; the 1-D filter
  along each axis; a Python callable (256^2) and vectorized_filter.
- GPU (--gpu): a cupy.RawKernel and a cupy.ReductionKernel through gpufilt
  and cupyx.scipy.ndimage, and a numba CUDA device function through gpufilt,
  on a 4096^2 float32 image, timed with CUDA events.

Each gpufilt result is checked against the peer's before it is timed.
Medians of repeated calls after a warm-up.

    python benchmarks/bench_generic.py [--gpu]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from _bench import median_ms

from gpufilt import ndimage as gf


def cpu_timer(f):
    def once():
        start = time.perf_counter()
        f()
        return (time.perf_counter() - start) * 1e3
    return once


def bench_cpu():
    import scipy
    from numba import cfunc, types
    from scipy import ndimage as sp

    @cfunc(types.intc(types.CPointer(types.float64), types.intp, types.CPointer(types.float64), types.voidptr))
    def window_mean(values, n, result, user_data):
        total = 0.0
        for i in range(n):
            total += values[i]
        result[0] = total / n
        return 1

    @cfunc(types.intc(types.CPointer(types.float64), types.intp, types.CPointer(types.float64), types.intp,
                      types.voidptr))
    def line_mean(line_in, in_length, line_out, out_length, user_data):
        k = in_length - out_length + 1
        for i in range(out_length):
            total = 0.0
            for j in range(k):
                total += line_in[i + j]
            line_out[i] = total / k
        return 1

    a = np.random.default_rng(0).random((1024, 1024))
    cores = os.cpu_count()
    print(f"CPU, 1024^2 float64, {cores} cores; ms (median)")
    for size in (3, 5):
        low_level = scipy.LowLevelCallable(window_mean.ctypes)
        reference = sp.generic_filter(a, low_level, size=size)
        assert np.array_equal(gf.generic_filter(a, window_mean, size=size), reference)
        ms = median_ms(cpu_timer(lambda: sp.generic_filter(a, low_level, size=size)))
        row = [f"generic_filter {size}x{size}: scipy {ms:.1f}"]
        for threads in sorted({1, 2, cores}):
            ms = median_ms(cpu_timer(lambda: gf.generic_filter(a, window_mean, size=size, threads=threads)))
            row.append(f"gpufilt {threads} thread(s) {ms:.1f}")
        print(", ".join(row))
    low_level = scipy.LowLevelCallable(line_mean.ctypes)
    for axis in (0, 1):
        assert np.array_equal(gf.generic_filter1d(a, line_mean, 5, axis=axis),
                              sp.generic_filter1d(a, low_level, 5, axis=axis))
        row = [f"generic_filter1d 5 axis {axis}: scipy "
               f"{median_ms(cpu_timer(lambda: sp.generic_filter1d(a, low_level, 5, axis=axis))):.1f}"]
        for threads in sorted({1, 2, cores}):
            ms = median_ms(cpu_timer(lambda: gf.generic_filter1d(a, line_mean, 5, axis=axis, threads=threads)))
            row.append(f"gpufilt {threads} thread(s) {ms:.1f}")
        print(", ".join(row))
    small = a[:256, :256]
    print(f"generic_filter 3x3, Python callable, 256^2: scipy "
          f"{median_ms(cpu_timer(lambda: sp.generic_filter(small, np.mean, size=3)), max_reps=3):.0f}, gpufilt "
          f"{median_ms(cpu_timer(lambda: gf.generic_filter(small, np.mean, size=3)), max_reps=3):.0f}")
    print(f"vectorized_filter 5x5 mean: scipy "
          f"{median_ms(cpu_timer(lambda: sp.vectorized_filter(a, np.mean, size=5)), max_reps=5):.0f}, gpufilt "
          f"{median_ms(cpu_timer(lambda: gf.vectorized_filter(a, np.mean, size=5)), max_reps=5):.0f}")


def bench_gpu():
    import cupy as cp
    import cupyx.scipy.ndimage as cx
    from numba import cuda

    def timer(f):
        start, stop = cp.cuda.Event(), cp.cuda.Event()

        def once():
            start.record()
            f()
            stop.record()
            stop.synchronize()
            return cp.cuda.get_elapsed_time(start, stop)
        return once

    raw = cp.RawKernel(r"""
extern "C" __global__ void window_mean(const double* x, int n, double* out) {
    double total = 0.0;
    for (int i = 0; i < n; ++i) total += x[i];
    *out = total / n;
}""", "window_mean")
    reduction = cp.ReductionKernel("T x", "T y", "x", "a + b", "y = a / _in_ind.size()", "0", "window_mean_rk")

    @cuda.jit(device=True)
    def numba_mean(values):
        total = 0.0
        for i in range(len(values)):
            total += values[i]
        return total / len(values)

    x = cp.asarray(np.random.default_rng(0).random((4096, 4096), dtype=np.float32))
    print("GPU, 4096^2 float32; ms (median, CUDA events)")
    for size in (3, 5):
        want = cx.generic_filter(x, raw, size=size)
        got = gf.generic_filter(x, raw, size=size)
        assert float(abs(got - want).max()) < 1e-5
        print(f"RawKernel {size}x{size}: cupyx {median_ms(timer(lambda: cx.generic_filter(x, raw, size=size))):.2f}, "
              f"gpufilt {median_ms(timer(lambda: gf.generic_filter(x, raw, size=size))):.2f}; "
              f"ReductionKernel: cupyx {median_ms(timer(lambda: cx.generic_filter(x, reduction, size=size))):.2f}, "
              f"gpufilt {median_ms(timer(lambda: gf.generic_filter(x, reduction, size=size))):.2f}; "
              f"numba: gpufilt {median_ms(timer(lambda: gf.generic_filter(x, numba_mean, size=size))):.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="the GPU benchmark (cupy, cupyx, numba-cuda)")
    args = parser.parse_args()
    bench_gpu() if args.gpu else bench_cpu()
