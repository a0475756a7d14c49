"""gpufilt's minimum and maximum filters on the GPU over window sizes the fused
tiles are not built for: maximum_filter on 512^3 and 16384^2 arrays of three
dtypes, and single minimum passes along each axis (a size along one axis
only). Medians of CUDA-event-timed calls after a warm-up (bench_sweep.py's
timer); gpufilt alone
(bench_sweep.py times cupyx beside it for sizes up to 31).

Before/after comparisons run it twice on one machine, once against each
install (e.g. PYTHONPATH=/tmp/old-site for the older wheel): the table of
benchmarks/RESULTS.md came from that.

    python benchmarks/bench_extremes.py [--sizes 2,6,11,17,21,31,45,65]
"""
from __future__ import annotations

import argparse

import cupy as cp
from bench_sweep import timer

import gpufilt
from gpufilt import ndimage as gf


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2,6,11,17,21,31,45,65", help="comma-separated window sizes")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    time_ms = timer(cp)
    rng = cp.random.default_rng(0)
    print(gpufilt.__file__, cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
    print("maximum_filter (ms), sizes", sizes)
    for shape in [(512,) * 3, (16384,) * 2]:
        for dtype in ["float32", "uint16", "float64"]:
            if dtype == "float64" and len(shape) == 2:
                continue
            x = rng.random(shape, dtype=cp.float32)
            x = (x * 60000).astype(dtype) if dtype == "uint16" else x.astype(dtype)
            out = cp.empty_like(x)
            row = [time_ms(lambda: gf.maximum_filter(x, n, output=out)) for n in sizes]
            print(f"{dtype:8s} {'x'.join(map(str, shape)):12s} " + " ".join(f"{v:6.2f}" for v in row), flush=True)
    print("one pass of minimum_filter (size n along one axis), float32 (ms)")
    for shape in [(512,) * 3, (16384,) * 2]:
        x = rng.random(shape, dtype=cp.float32)
        out = cp.empty_like(x)
        for axis in range(len(shape)):
            def size_along(n, axis=axis):
                window = [1] * len(shape)
                window[axis] = n
                return tuple(window)
            row = [time_ms(lambda: gf.minimum_filter(x, size_along(n), output=out)) for n in sizes]
            print(f"{'x'.join(map(str, shape)):12s} axis {axis} " + " ".join(f"{v:6.3f}" for v in row), flush=True)


if __name__ == "__main__":
    main()
