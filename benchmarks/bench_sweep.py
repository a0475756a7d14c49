"""Parameter sweep on the GPU: gpufilt against cupyx.scipy.ndimage over the
parameters users choose, judged by the worst point (issue 30).

Sweeps, each point gpufilt and cupyx on the same random cupy array, in this
process, timed with CUDA events (median of repeats after a warm-up call, the
warm-up also compiling cupyx's kernel for the point):
  * gaussian_filter, sigma 0.3 to 8 in steps of 0.1, on a 3-D and a 2-D array;
  * uniform_filter, minimum_filter and maximum_filter, sizes 1 to 31;
  * gaussian_laplace and gaussian_gradient_magnitude over a sigma grid, and
    their ratio to the gaussian of the same sigma;
  * float16, uint8 and uint16 gaussians over a sigma grid, as a ratio to
    float32's time (cupyx alongside where it takes the dtype);
  * volume size: gaussians of 1024^3 against 8 x their 512^3 time;
  * anisotropic shapes.
Each family prints its table, its worst ratio to cupyx (cupyx time / gpufilt
time: above 1 is faster) and the parameter where it falls; --json keeps every
point, --png draws time against the parameter.

--cpu sweeps the CPU instead: gpufilt on numpy arrays with one thread and
with every core against scipy (one thread), gaussian sigma (also of
gaussian_laplace and gaussian_gradient_magnitude) and box sizes on a 3-D
and a 2-D array of each of --dtypes (default float32); the ratio is scipy's
time / gpufilt's on one thread.

--cpu-boxes times the CPU's 1-D box passes one by one (uniform_filter1d,
minimum_filter1d, maximum_filter1d; sizes 3 to 63 along axis 0 and -1 of
4096^2 float32, uint8 and uint16, along axis 0 of 256^3 float32), one thread,
against scipy in the same process; with --baseline DIR, also against an
older build: DIR holds a copy of its python/gpufilt package, with its
_core module, renamed gpufilt_base, and each point's calls alternate
between the two (medians of --repeats pairs), so that other work on the
machine weighs on both alike.

Usage: python benchmarks/bench_sweep.py [--cpu [--dtypes D[,D]] | --cpu-boxes [--baseline DIR]] [--quick]
                                        [--only NAME[,NAME]] [--json PATH] [--png PATH]
"""
from __future__ import annotations

import argparse
import itertools

import numpy as np

import _bench

BUDGET_S = 0.2  # seconds of timing per library and point


def timer(cp):
    """time_ms(f): the median of CUDA-event-timed calls of f after a warm-up."""
    start, stop = cp.cuda.Event(), cp.cuda.Event()

    def once(f):
        start.record()
        f()
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop)

    def time_ms(f, budget_s=BUDGET_S):
        return _bench.median_ms(lambda: once(f), budget_s=budget_s, max_reps=30, min_reps=3)

    return time_ms


def random_array(cp, shape, dtype, seed=0):
    rng = cp.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.random(shape, dtype=cp.float32).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, size=shape, dtype=cp.int64).astype(dtype)


def sweep(name, points, run_gf, run_cx, time_ms, check):
    """Rows for one family: each point's gpufilt and cupyx times and ratio."""
    rows = []
    for label, param in points:
        gf = time_ms(lambda: run_gf(param))
        cx = None
        if run_cx is not None:
            check(run_gf(param), run_cx(param), f"{name} {label}")
            cx = time_ms(lambda: run_cx(param), budget_s=BUDGET_S / 2)
        rows.append({"family": name, "param": label, "gpufilt_ms": gf, "cupyx_ms": cx,
                     "x_cupyx": _bench.ratio(cx, gf)})
        print(f"  {name:<34} {label:>10}  gpufilt {gf:8.3f} ms  cupyx {_bench.fmt(cx):>8} ms  "
              f"x{_bench.fmt(_bench.ratio(cx, gf))}", flush=True)
    return rows


def worst(rows, key="x_cupyx"):
    values = [r for r in rows if r.get(key) is not None]
    return min(values, key=lambda r: r[key]) if values else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="coarser grids and smaller arrays")
    parser.add_argument("--only", default="", help="comma-separated family name filters")
    parser.add_argument("--sigma-step", type=float, default=None, help="gaussian sigma grid step (default 0.1)")
    parser.add_argument("--size-step", type=int, default=None, help="box size grid step (default 1)")
    parser.add_argument("--json", help="write every point to this JSON file")
    parser.add_argument("--png", help="write time against parameter charts")
    parser.add_argument("--cpu", action="store_true", help="sweep the CPU kernels against scipy instead")
    parser.add_argument("--cpu-boxes", action="store_true", help="the CPU's 1-D box passes against scipy")
    parser.add_argument("--dtypes", default="float32", help="--cpu: comma-separated dtypes (scipy's: no float16)")
    parser.add_argument("--baseline", help="--cpu-boxes: a folder holding an older build as gpufilt_base")
    parser.add_argument("--sizes", default="3,5,9,15,21,31,45,63", help="--cpu-boxes: window sizes")
    parser.add_argument("--repeats", type=int, default=7, help="--cpu-boxes: timed calls (pairs) a point")
    args = parser.parse_args(argv)
    if args.cpu:
        return cpu_sweep(args)
    if args.cpu_boxes:
        return cpu_boxes(args)

    import cupy as cp
    import cupyx.scipy.ndimage as cx
    from gpufilt import ndimage as gf

    time_ms = timer(cp)
    only = [s for s in args.only.split(",") if s]
    wanted = lambda name: not only or any(s in name for s in only)
    failures = []

    def check(result, reference, what):
        text = _bench.check_text(result.get(), reference.get())
        if not text.startswith("ok"):
            failures.append(f"{what}: {text}")
            print(f"  FAIL {what}: {text}")

    big3 = (256,) * 3 if args.quick else (512,) * 3
    big2 = (8192,) * 2 if args.quick else (16384,) * 2
    step = args.sigma_step or (0.5 if args.quick else 0.1)
    sigmas = [round(s, 1) for s in np.arange(0.3, 8.0 + 1e-9, step)]
    sizes = list(range(1, 32, args.size_step or (2 if args.quick else 1)))
    coarse = [0.5, 1, 1.5, 2, 3, 4, 6, 8]
    rows = []

    def gaussian_and_boxes(shape):
        x = random_array(cp, shape, "float32")
        tag = "x".join(map(str, shape))
        out = cp.empty_like(x)
        found = []
        if wanted(f"gaussian {tag}"):
            found += sweep(f"gaussian float32 {tag}", [(f"sigma {s}", s) for s in sigmas],
                           lambda s: gf.gaussian_filter(x, s, output=out), lambda s: cx.gaussian_filter(x, s),
                           time_ms, check)
        for filt in ("uniform_filter", "minimum_filter", "maximum_filter"):
            if wanted(f"{filt} {tag}"):
                found += sweep(f"{filt} float32 {tag}", [(f"size {n}", n) for n in sizes],
                               lambda n, f=filt: getattr(gf, f)(x, n, output=out),
                               lambda n, f=filt: getattr(cx, f)(x, n), time_ms, check)
        return found

    for shape in (big3, big2):
        rows += gaussian_and_boxes(shape)

    x = random_array(cp, big3, "float32")
    tag = "x".join(map(str, big3))
    for filt in ("gaussian_laplace", "gaussian_gradient_magnitude"):
        if wanted(f"{filt} {tag}"):
            family = sweep(f"{filt} float32 {tag}", [(f"sigma {s}", s) for s in coarse],
                           lambda s, f=filt: getattr(gf, f)(x, s), lambda s, f=filt: getattr(cx, f)(x, s),
                           time_ms, check)
            for r, s in zip(family, coarse):
                r["x_gaussian"] = r["gpufilt_ms"] / time_ms(lambda: gf.gaussian_filter(x, s))
            rows += family
    del x

    if wanted("dtypes"):
        for shape in ((256,) * 3, (8192,) * 2):
            tag = "x".join(map(str, shape))
            base = random_array(cp, shape, "float32")
            reference = {s: time_ms(lambda: gf.gaussian_filter(base, s)) for s in coarse}
            for dtype in ("float16", "uint8", "uint16"):
                x = random_array(cp, shape, dtype)
                family = sweep(f"gaussian {dtype} {tag}", [(f"sigma {s}", s) for s in coarse],
                               lambda s: gf.gaussian_filter(x, s),
                               None if dtype == "float16" else (lambda s: cx.gaussian_filter(x, s)), time_ms, check)
                for r, s in zip(family, coarse):
                    r["x_float32"] = r["gpufilt_ms"] / reference[s]
                rows += family

    if wanted("volume") and not args.quick:
        for s in (1, 2, 3, 4):
            small = random_array(cp, (512,) * 3, "float32")
            t_small = time_ms(lambda: gf.gaussian_filter(small, s))
            del small
            large = random_array(cp, (1024,) * 3, "float32")
            t_large = time_ms(lambda: gf.gaussian_filter(large, s))
            del large
            rows.append({"family": "volume 1024^3 / 8 x 512^3", "param": f"sigma {s}", "gpufilt_ms": t_large,
                         "x_linear": t_large / (8 * t_small)})
            print(f"  gaussian sigma {s}: 1024^3 {t_large:.3f} ms, 8 x 512^3 {8 * t_small:.3f} ms, "
                  f"ratio {t_large / (8 * t_small):.3f}", flush=True)

    if wanted("anisotropic"):
        for shape in ((64, 2048, 2048), (2048, 256, 256), (512, 512, 64)):
            x = random_array(cp, shape, "float32")
            rows += sweep(f"gaussian float32 {'x'.join(map(str, shape))}", [(f"sigma {s}", s) for s in coarse],
                          lambda s: gf.gaussian_filter(x, s), lambda s: cx.gaussian_filter(x, s), time_ms, check)
            del x

    print("\nWorst point of each family (cupyx time / gpufilt time; above 1: gpufilt faster)")
    table = []
    for family in dict.fromkeys(r["family"] for r in rows):
        members = [r for r in rows if r["family"] == family]
        w = worst(members)
        slowest = max(members, key=lambda r: r["gpufilt_ms"])
        extra = ""
        for key in ("x_gaussian", "x_float32", "x_linear"):
            values = [r[key] for r in members if key in r]
            if values:
                extra = f"{key} max {max(values):.2f}"
        table.append([family, w["param"] if w else "-", _bench.fmt(w["x_cupyx"]) if w else "-",
                      f"{slowest['gpufilt_ms']:.3f} ({slowest['param']})", extra])
    _bench.print_table(["family", "worst point", "x cupyx", "slowest gpufilt ms", "other"], table)
    overall = worst(rows)
    if overall:
        print(f"\nworst over the whole sweep: x{overall['x_cupyx']:.2f} ({overall['family']}, {overall['param']})")
    if failures:
        print(f"\n{len(failures)} result checks FAILED:\n  " + "\n  ".join(failures))
    device = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()
    if args.json:
        _bench.write_json(args.json, {"device": device, "points": rows, "failures": failures})
    if args.png:
        draw(rows, args.png, device)
    return 1 if failures else 0


def print_worst_against_scipy(rows, key, label):
    """Each family's point of the lowest rows[key] (scipy's time / gpufilt's on one thread), as a table."""
    print("\nWorst point of each family (scipy time / gpufilt time on one thread)")
    table = []
    for family in dict.fromkeys(r["family"] for r in rows):
        w = min((r for r in rows if r["family"] == family), key=lambda r: r[key])
        table.append([family, label(w), f"{w[key]:.1f}"])
    _bench.print_table(["family", "worst point", "x scipy (1 thread)"], table)


def cpu_sweep(args):
    """gpufilt's CPU kernels, one thread and all cores, against scipy."""
    import os
    import time

    import scipy.ndimage as sp
    from gpufilt import ndimage as gf

    def time_ms(f):
        def once():
            start = time.perf_counter()
            f()
            return (time.perf_counter() - start) * 1e3
        return _bench.median_ms(once, budget_s=1.0, max_reps=10, min_reps=1, keep_first=True)

    cores = os.cpu_count()
    only = [s for s in args.only.split(",") if s]
    step = args.sigma_step or (1.0 if args.quick else 0.5)
    sigmas = [round(s, 1) for s in np.arange(0.5, 8.0 + 1e-9, step)]
    sizes = list(range(1, 32, args.size_step or 2))
    rows = []
    families = [(f, [(f"sigma {s}", s) for s in sigmas])
                for f in ("gaussian_filter", "gaussian_laplace", "gaussian_gradient_magnitude")]
    families += [(f, [(f"size {n}", n) for n in sizes]) for f in ("uniform_filter", "maximum_filter")]
    shapes = ((128,) * 3, (2048,) * 2) if args.quick else ((256,) * 3, (4096,) * 2)
    for shape, dtype in itertools.product(shapes, args.dtypes.split(",")):
        x = random_array(np, shape, dtype)
        tag = "x".join(map(str, shape))
        for name, points in families:
            family = f"{name} {dtype} {tag}"
            if only and not any(o in family for o in only):
                continue
            for label, param in points:
                one = time_ms(lambda: getattr(gf, name)(x, param, threads=1))
                alll = time_ms(lambda: getattr(gf, name)(x, param, threads=cores))
                ref = time_ms(lambda: getattr(sp, name)(x, param))
                text = _bench.check_text(getattr(gf, name)(x, param), getattr(sp, name)(x, param))
                rows.append({"family": family, "param": label, "gpufilt_1_ms": one, f"gpufilt_{cores}_ms": alll,
                             "scipy_ms": ref, "x_scipy_1": ref / one, "check": text})
                print(f"  {family:<34} {label:>10}  1 thread {one:9.2f} ms  {cores} threads {alll:8.2f} ms  "
                      f"scipy {ref:9.1f} ms  x{ref / one:.1f}  {text}", flush=True)
    print_worst_against_scipy(rows, "x_scipy_1", lambda r: r["param"])
    if args.json:
        _bench.write_json(args.json, {"cores": cores, "points": rows})
    return 1 if any(not r["check"].startswith("ok") for r in rows) else 0


def cpu_boxes(args):
    """One-thread 1-D box passes against scipy (and an older build), medians of interleaved calls."""
    import sys
    import time

    import scipy.ndimage as sp
    from gpufilt import ndimage as gf
    base = None
    if args.baseline:
        sys.path.insert(0, args.baseline)
        from gpufilt_base import ndimage as base

    def once(f):
        start = time.perf_counter()
        f()
        return (time.perf_counter() - start) * 1e3

    rng = np.random.default_rng(0)
    arrays = [("float32 4096^2", lambda: rng.random((4096, 4096), dtype=np.float32), (0, -1)),
              ("uint8 4096^2", lambda: rng.integers(0, 256, (4096, 4096), dtype=np.uint8), (0, -1)),
              ("uint16 4096^2", lambda: rng.integers(0, 4096, (4096, 4096), dtype=np.uint16), (0, -1)),
              ("float32 256^3", lambda: rng.random((256,) * 3, dtype=np.float32), (0,))]
    sizes = [int(n) for n in args.sizes.split(",")]
    only = [s for s in args.only.split(",") if s]
    rows = []
    for tag, make, axes in arrays:
        x = make()
        out = np.empty_like(x)
        for name in ("uniform_filter1d", "minimum_filter1d", "maximum_filter1d"):
            for axis in axes:
                family = f"{name} {tag} axis {axis}"
                if only and not any(o in family for o in only):
                    continue
                for n in sizes:
                    def run(module, n=n):
                        return lambda: getattr(module, name)(x, n, axis=axis, output=out, threads=1)
                    text = _bench.check_text(getattr(gf, name)(x, n, axis=axis), getattr(sp, name)(x, n, axis=axis))
                    run(gf)()  # warm-up
                    if base is not None:
                        run(base)()
                    new, old = [], []
                    for _ in range(args.repeats):
                        if base is not None:
                            old.append(once(run(base)))
                        new.append(once(run(gf)))
                    ref = [once(lambda: getattr(sp, name)(x, n, axis=axis)) for _ in range(3)]
                    row = {"family": family, "size": n, "gpufilt_ms": float(np.median(new)),
                           "scipy_ms": float(np.median(ref)), "check": text}
                    row["x_scipy"] = row["scipy_ms"] / row["gpufilt_ms"]
                    if base is not None:
                        row["baseline_ms"] = float(np.median(old))
                        row["x_baseline"] = row["baseline_ms"] / row["gpufilt_ms"]
                    rows.append(row)
                    before = f"before {row['baseline_ms']:7.1f} ms (x{row['x_baseline']:4.2f})  " if base else ""
                    print(f"  {family:<38} size {n:3d}  {before}gpufilt {row['gpufilt_ms']:7.1f} ms  "
                          f"scipy {row['scipy_ms']:7.1f} ms  x{row['x_scipy']:5.1f}  {text}", flush=True)
    print_worst_against_scipy(rows, "x_scipy", lambda r: f"size {r['size']}")
    if args.json:
        _bench.write_json(args.json, {"points": rows})
    return 1 if any(not r["check"].startswith("ok") for r in rows) else 0


def draw(rows, path, device):
    """Time against the parameter, gpufilt and cupyx, one panel per family with cupyx times."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    families = [f for f in dict.fromkeys(r["family"] for r in rows)
                if any(r["cupyx_ms"] for r in rows if r["family"] == f)]
    cols = 3
    panel_rows = (len(families) + cols - 1) // cols
    fig, axes = plt.subplots(panel_rows, cols, figsize=(15, 3.2 * panel_rows), squeeze=False)
    for ax, family in zip(axes.flat, families):
        members = [r for r in rows if r["family"] == family]
        xs = [float(r["param"].split()[-1]) for r in members]
        ax.plot(xs, [r["gpufilt_ms"] for r in members], label="gpufilt")
        ax.plot(xs, [r["cupyx_ms"] for r in members], label="cupyx")
        ax.set_yscale("log")
        ax.set_title(family, fontsize=9)
        ax.set_xlabel(members[0]["param"].split()[0])
        ax.set_ylabel("ms")
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(families):]:
        ax.axis("off")
    fig.suptitle(f"gpufilt and cupyx.scipy.ndimage against the parameter ({device})")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
