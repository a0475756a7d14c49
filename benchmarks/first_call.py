"""First-call latency on the GPU: how long the first call of each filter
takes in a fresh process (loading the CUDA module's kernels, and compiling
them from PTX where the build carries no machine code for this GPU), against
the second call of the same filter.

Usage: python benchmarks/first_call.py   (in a fresh process each time; set
CUDA_CACHE_PATH to an empty folder to see the driver's PTX compilation
uncached, run it again for the cached case)
"""
from __future__ import annotations

import time


def main():
    started = time.perf_counter()
    import cupy as cp

    cp.cuda.Device().synchronize()  # the CUDA context, outside the figures
    context_s = time.perf_counter() - started
    started = time.perf_counter()
    from gpufilt import ndimage

    import_s = time.perf_counter() - started
    volume = cp.random.default_rng(0).random((64, 128, 128), dtype=cp.float32)
    plane = cp.random.default_rng(1).random((1024, 1024), dtype=cp.float32)
    cases = [
        ("gaussian_filter sigma 1, 3-D", lambda: ndimage.gaussian_filter(volume, 1.0)),
        ("gaussian_filter sigma 2, 2-D", lambda: ndimage.gaussian_filter(plane, 2.0)),
        ("gaussian_filter sigma 1.5, 3-D", lambda: ndimage.gaussian_filter(volume, 1.5)),
        ("uniform_filter 3, 3-D", lambda: ndimage.uniform_filter(volume, 3)),
        ("median_filter 3, 3-D", lambda: ndimage.median_filter(volume, 3)),
        ("sobel, 2-D", lambda: ndimage.sobel(plane)),
    ]
    print(f"CUDA context {context_s * 1e3:.0f} ms, import gpufilt.ndimage {import_s * 1e3:.0f} ms")
    for name, call in cases:
        times = []
        for _ in range(2):
            t = time.perf_counter()
            call()
            cp.cuda.Device().synchronize()
            times.append(time.perf_counter() - t)
        print(f"{name:<34} first call {times[0] * 1e3:9.1f} ms   second {times[1] * 1e3:7.2f} ms")


if __name__ == "__main__":
    main()
