"""gpufilt alone over the tap counts that no tile kernel is built for
(issue 30): gaussian sigma 0.3 to 2.0 and box sizes 2 to 17 on a 512^3
volume and a 16384^2 image of float32, gaussians of other dtypes, and the
derivative-of-gaussian filters. Chains of these taps are padded into the
tiles (3-D: 9 taps; 2-D: 9 or 17) or split into a pass along axis 0 and a
stack of planes (src/cuda/fused.cu). `--volume-chains` times only the
chains that run as stacks of planes: sigma (0, s, s), derivative orders,
gaussian_laplace and gaussian_gradient_magnitude (fused_derivative_sum),
and single passes along axis 0 beside them.

Each point is the median of CUDA-event-timed calls after a warm-up
(bench_sweep's timer and random arrays). To compare two builds, run it
once against each install on the same machine and hand the older run's
JSON to the newer one with --compare:

    PYTHONPATH=OLD python benchmarks/bench_taps.py --json old.json
    python benchmarks/bench_taps.py --json new.json --compare old.json
"""
from __future__ import annotations

import argparse
import json

from bench_sweep import random_array, timer  # CUDA-event medians after a warm-up; full-range integers


def float32_points(cp, gf, time_ms, shape, rows):
    x = random_array(cp, shape, "float32")
    out = cp.empty_like(x)
    tag = "x".join(map(str, shape))
    for s in [round(0.3 + 0.1 * i, 1) for i in range(18)]:
        rows[f"gaussian {tag} {s}"] = time_ms(lambda: gf.gaussian_filter(x, s, output=out))
    for n in range(2, 18):
        for f in ("uniform_filter", "maximum_filter"):
            rows[f"{f} {tag} {n}"] = time_ms(lambda: getattr(gf, f)(x, n, output=out))
    for f in ("gaussian_laplace", "gaussian_gradient_magnitude"):
        for s in (0.5, 1.0, 1.5, 2.0):
            rows[f"{f} {tag} {s}"] = time_ms(lambda: getattr(gf, f)(x, s, output=out))


def dtype_points(cp, gf, time_ms, shape, dtype, rows):
    x = random_array(cp, shape, dtype)
    out = cp.empty_like(x)
    tag = "x".join(map(str, shape))
    for s in (0.5, 0.8, 1.0, 1.5, 2.0):
        rows[f"gaussian {tag} {dtype} {s}"] = time_ms(lambda: gf.gaussian_filter(x, s, output=out))


def volume_chain_points(cp, gf, time_ms):
    """{name: ms}: 512^3 chains over stacks of planes, and their first passes alone."""
    rows = {}
    x = random_array(cp, (512,) * 3, "float32")
    out = cp.empty_like(x)
    for f in ("gaussian_laplace", "gaussian_gradient_magnitude"):
        for s in (0.5, 0.8, 1.0, 1.5, 2.0):
            rows[f"{f} 512^3 {s}"] = time_ms(lambda: getattr(gf, f)(x, s, output=out))
    for s in (0.5, 1.0, 1.2, 2.0):
        for o in (0, 2):
            rows[f"gaussian_filter1d axis 0 order {o} 512^3 {s}"] = time_ms(
                lambda: gf.gaussian_filter1d(x, s, axis=0, order=o, output=out))
    for o in ((1, 0, 0), (0, 1, 0), (0, 0, 2)):
        rows[f"gaussian order {o} 512^3 s1"] = time_ms(lambda: gf.gaussian_filter(x, 1.0, order=o, output=out))
    for sigma in ((0, 1.0, 1.0), (0, 2.0, 2.0), (0, 0.5, 0.5), (0, 4.0, 4.0)):
        rows[f"gaussian 512^3 float32 {sigma}"] = time_ms(lambda: gf.gaussian_filter(x, sigma, output=out))
    for sigma in ((0, 1.0, 1.0), (0, 2.0, 2.0)):
        rows[f"gaussian 512^3 float32 order (0,1,0) {sigma}"] = time_ms(
            lambda: gf.gaussian_filter(x, sigma, order=(0, 1, 0), output=out))
    del x, out
    for dtype in ("float64", "uint16", "int32"):
        y = random_array(cp, (512,) * 3, dtype)
        out = cp.empty_like(y)
        for sigma in (0.8, 1.0, (0, 1.0, 1.0), (0, 2.0, 2.0)):
            rows[f"gaussian 512^3 {dtype} {sigma}"] = time_ms(lambda: gf.gaussian_filter(y, sigma, output=out))
        del y, out
    return rows


def points(cp, gf, time_ms):
    """{name: ms} over every point (each array freed before the next)."""
    rows = {}
    for shape in ((512,) * 3, (16384,) * 2):
        float32_points(cp, gf, time_ms, shape, rows)
    for dtype in ("float16", "uint8", "uint16", "float64"):
        dtype_points(cp, gf, time_ms, (512,) * 3, dtype, rows)
    for dtype in ("uint16", "float64"):
        dtype_points(cp, gf, time_ms, (16384,) * 2, dtype, rows)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write every point to this JSON file")
    parser.add_argument("--compare", help="an older run's JSON: print its time, this one's and their ratio")
    parser.add_argument("--volume-chains", action="store_true", help="only the chains over stacks of planes")
    args = parser.parse_args(argv)

    import cupy as cp
    from gpufilt import ndimage as gf

    rows = (volume_chain_points if args.volume_chains else points)(cp, gf, timer(cp))
    old = json.load(open(args.compare))["points"] if args.compare else {}
    for name, ms in rows.items():
        line = f"{name:48s} {ms:8.3f} ms"
        if name in old:
            line += f"  was {old[name]:8.3f}  x{old[name] / ms:5.2f}"
        print(line)
    if args.json:
        device = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()
        with open(args.json, "w") as f:
            json.dump({"device": device, "points": rows}, f, indent=1)


if __name__ == "__main__":
    main()
