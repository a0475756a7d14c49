"""CPU benchmark: gpufilt.ndimage on numpy arrays against scipy.ndimage and OpenCV (issue 5).

What it measures, per case and per thread count (default: 1 and all cores):
  * the median time of one call for gpufilt, scipy.ndimage and, for the 2-D
    cases, OpenCV when importable (cv2.GaussianBlur with scipy's kernel size
    2*round(4*sigma)+1 and BORDER_REFLECT; cv2.medianBlur for the 5x5 uint8
    median, compared in scipy's 'nearest' mode, which is OpenCV's border);
  * gpufilt's speed-up over scipy (scipy time / gpufilt time; scipy.ndimage
    is single-threaded) and over OpenCV at the same thread count;
  * parallel efficiency t1 / (tN * N) of gpufilt and OpenCV;
  * the per-call overhead of uniform_filter on a 16-element array.

How: every thread count runs in its own subprocess of this script
(`--threads N --worker PATH`) with OMP_NUM_THREADS=N; OpenCV gets
cv2.setNumThreads(N). Each count's calls then run back to back, the steady
state of a program that uses its cores. Interleaving the counts in one
process (threads= set between calls) measured the VM instead: on the
16-core GPU machine a 16-thread call after one-thread calls ran up to 3x
slower than in a run of 16-thread calls, even after an untimed call between
(gaussian sigma 1 on 256^3: 7.99 ms against 3.65; laplace 7.99 against
2.32), while one-thread times agreed.
In each worker, gpufilt's and OpenCV's results are first checked against
scipy's (max |diff| relative to the data range, 1e-4 for floats, 1 unit for
integers, 3 for OpenCV's fixed-point uint8 GaussianBlur; FAIL is printed and
the run goes on). Then each library gets a warm-up call and time.perf_counter
times repeated calls on the same random array (never zeros); the repeat
count adapts so a case takes ~0.75 s per library. scipy.ndimage is
single-threaded, so it is timed in the first worker only and its time serves
every row. Per-call overhead: thousands of back-to-back calls timed together,
divided by the count. Library errors are reported in the table and do not
stop the run.

--quick keeps the issue's array sizes but checks results on arrays 4x
smaller per axis, times ~0.3 s per library and case, and counts the warm-up
call as a sample (a call slower than that runs once): 1 and 2 threads took
34 s on a 2-core machine, mostly scipy's single calls (the 5x5 median alone
is ~7 s), which run once whatever the thread counts. --small divides the
timed arrays by 4 per axis too (a smoke test).

--preallocated gives gpufilt and scipy an output array allocated once per
case (output=), as a program filtering many volumes would: a fresh 64 MiB
output costs the operating system's page faults and zeroing at first touch
and its unmapping when freed, a few milliseconds that do not shrink with
threads and so cap the parallel efficiency of a plain call.

Usage: python benchmarks/bench_cpu.py [--quick] [--small] [--preallocated]
                                      [--threads 1,all] [--cases SUBSTRING,...] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

import _bench


@dataclass
class Case:
    """One benchmark: call(nd, x) runs the filter with module nd (gpufilt or scipy)."""
    name: str
    shape: tuple
    dtype: str
    call: Callable
    opencv: Callable | None = None   # opencv(cv2, x), matching call's result
    opencv_int_tolerance: int = 1    # allowed integer difference of OpenCV's result
    per_call: bool = False           # time back-to-back calls, in us


def gaussian_blur(sigma):
    """cv2.GaussianBlur equal to scipy's gaussian_filter(x, sigma) (truncate 4, reflect)."""
    size = 2 * int(4 * sigma + 0.5) + 1
    return lambda cv2, x: cv2.GaussianBlur(x, (size, size), sigmaX=sigma, sigmaY=sigma,
                                           borderType=cv2.BORDER_REFLECT)


# correlate/convolve weights: bench_gpu.py's smoothing (none negative: float
# sums for float32 data) and the same with their mean taken off (signed:
# double sums, scipy's bits).
SMOOTHING_WEIGHTS = np.random.default_rng(1).random((5, 5, 5))
SIGNED_WEIGHTS = SMOOTHING_WEIGHTS - SMOOTHING_WEIGHTS.mean()
HEIGHTS = np.random.default_rng(2).integers(-3, 4, (3, 3, 3)).astype(float)  # non-flat grey morphology


def build_cases(div=1):
    """The issue's cases, each axis divided by div (4: 256^3 -> 64^3, 4096^2 -> 1024^2)."""
    vol, small_vol, img = (256 // div,) * 3, (128 // div,) * 3, (4096 // div,) * 2

    def case(name, shape, dtype, call, **options):
        dims = f"{shape[0]}^{len(shape)}" if len(shape) > 1 else str(shape[0])
        return Case(f"{name} {dims} {dtype}", shape, dtype, call, **options)
    return [
        case("gaussian_filter sigma=1", vol, "float32", lambda nd, x, **kw: nd.gaussian_filter(x, 1, **kw)),
        case("gaussian_filter sigma=4", vol, "float32", lambda nd, x, **kw: nd.gaussian_filter(x, 4, **kw)),
        case("uniform_filter size=3", vol, "float32", lambda nd, x, **kw: nd.uniform_filter(x, 3, **kw)),
        case("uniform_filter size=9", vol, "float32", lambda nd, x, **kw: nd.uniform_filter(x, 9, **kw)),
        case("sobel axis=0", vol, "float32", lambda nd, x, **kw: nd.sobel(x, axis=0, **kw)),
        case("laplace", vol, "float32", lambda nd, x, **kw: nd.laplace(x, **kw)),
        case("maximum_filter size=3", vol, "float32", lambda nd, x, **kw: nd.maximum_filter(x, 3, **kw)),
        case("median_filter size=3", small_vol, "float32", lambda nd, x, **kw: nd.median_filter(x, 3, **kw)),
        case("convolve 5x5x5 weights", small_vol, "float32",
             lambda nd, x, **kw: nd.convolve(x, SMOOTHING_WEIGHTS, **kw)),
        case("convolve 5x5x5 signed weights", small_vol, "float32",
             lambda nd, x, **kw: nd.convolve(x, SIGNED_WEIGHTS, **kw)),
        case("gaussian_filter sigma=2", img, "float32", lambda nd, x, **kw: nd.gaussian_filter(x, 2, **kw),
             opencv=gaussian_blur(2)),
        case("gaussian_filter sigma=2", img, "uint8", lambda nd, x, **kw: nd.gaussian_filter(x, 2, **kw),
             opencv=gaussian_blur(2), opencv_int_tolerance=3),  # OpenCV: 8-bit fixed point
        case("median_filter size=5 nearest", img, "uint8",
             lambda nd, x, **kw: nd.median_filter(x, 5, mode="nearest", **kw),
             opencv=lambda cv2, x: cv2.medianBlur(x, 5)),
        case("uniform_filter size=3 (per call)", (16,), "float32",
             lambda nd, x, **kw: nd.uniform_filter(x, 3, **kw), per_call=True),
        # Morphology, Fourier and generic filters (issue 34's cases).
        case("grey_erosion size=3", vol, "float32", lambda nd, x, **kw: nd.grey_erosion(x, 3, **kw)),
        case("grey_opening size=3", vol, "float32", lambda nd, x, **kw: nd.grey_opening(x, 3, **kw)),
        case("white_tophat size=3", vol, "float32", lambda nd, x, **kw: nd.white_tophat(x, 3, **kw)),
        case("grey_erosion non-flat 3x3x3", small_vol, "float32",
             lambda nd, x, **kw: nd.grey_erosion(x, structure=HEIGHTS, **kw)),
        case("binary_erosion 10 iterations", img, "bool",
             lambda nd, x, **kw: nd.binary_erosion(x, iterations=10, **kw)),
        case("binary_fill_holes", img, "bool", lambda nd, x, **kw: nd.binary_fill_holes(x, **kw)),
        case("fourier_gaussian sigma=2", small_vol, "complex64",
             lambda nd, x, **kw: nd.fourier_gaussian(x, 2, **kw)),
        case("generic_filter 3x3 mean, numba cfunc", (1024 // div,) * 2, "float64", generic_mean),
    ]


def generic_mean(nd, x, **kw):
    """generic_filter with a numba cfunc computing the window's mean: scipy
    takes it as a scipy.LowLevelCallable, gpufilt as the cfunc itself (a
    LowLevelCallable would run on one thread, as scipy runs it)."""
    if "cfunc" not in _MEAN:
        from numba import carray, cfunc, types
        signature = types.intc(types.CPointer(types.double), types.intp, types.CPointer(types.double),
                               types.voidptr)

        @cfunc(signature)
        def mean(values, n, result, user_data):
            window = carray(values, (n,))
            total = 0.0
            for i in range(n):
                total += window[i]
            result[0] = total / n
            return 1
        _MEAN["cfunc"] = mean
    function = _MEAN["cfunc"]
    if nd.__name__.startswith("scipy"):
        import scipy
        function = scipy.LowLevelCallable(function.ctypes)
    return nd.generic_filter(x, function, size=3, **kw)


_MEAN = {}


def random_array(shape, dtype, seed=0):
    """Uniform random data: [0, 1) floats, or 0..255 for uint8."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.55
    if dtype == "complex64":
        return (rng.random(shape) + 1j * rng.random(shape)).astype(np.complex64)
    if dtype == "uint8":
        return rng.integers(0, 256, size=shape, dtype=np.uint8)
    return rng.random(shape, dtype=np.float32).astype(dtype, copy=False)


# ------------------------------------------------------------------ worker (one thread count)

def load_libraries(threads):
    """{'gpufilt': module, 'scipy': module, 'opencv': cv2 (when importable)}."""
    import scipy.ndimage
    from gpufilt import ndimage
    libs = {"gpufilt": ndimage, "scipy": scipy.ndimage}
    try:
        import cv2
        cv2.setNumThreads(threads)
        libs["opencv"] = cv2
    except ImportError:
        pass
    return libs


def bind(case, libs, preallocated=False):
    """{library: call(x)} for the libraries that implement this case; with
    `preallocated`, gpufilt and scipy write into an output array each library
    allocates once per shape (output=), except in the per-call case."""
    def library_call(nd):
        if not preallocated or case.per_call:
            return lambda x: case.call(nd, x)
        outputs = {}

        def call(x):
            key = (x.shape, x.dtype.str)
            if key not in outputs:
                outputs[key] = np.empty(x.shape, x.dtype)
            return case.call(nd, x, output=outputs[key])
        return call
    calls = {name: library_call(libs[name]) for name in ("gpufilt", "scipy")}
    if case.opencv is not None and "opencv" in libs:
        calls["opencv"] = lambda x: case.opencv(libs["opencv"], x)
    return calls


def check(case, calls, x):
    """{library: check text} for each non-scipy library, against scipy's result."""
    ref, ref_err = _bench.attempt(calls["scipy"], x)
    checks = {}
    for name in calls.keys() - {"scipy"}:
        out, err = _bench.attempt(calls[name], x)
        if err:
            checks[name] = f"ERROR {err}"
        else:
            tolerance = case.opencv_int_tolerance if name == "opencv" else _bench.INTEGER_TOLERANCE
            checks[name] = (f"unchecked (scipy: {ref_err})" if ref_err
                            else _bench.check_text(out, ref, tolerance))
    return checks


def time_once_ms(call, x):
    start = time.perf_counter()
    call(x)
    return (time.perf_counter() - start) * 1e3


def run_case(case, check_case, libs, args):
    """Checks (on check_case's array) and times one case for every library;
    returns its result record. scipy is timed only when args.time_scipy."""
    calls = bind(case, libs, args.preallocated)
    record = {"case": case.name, "per_call": case.per_call,
              "checks": check(case, calls, random_array(check_case.shape, check_case.dtype)),
              "times": {}, "errors": {}}
    x = random_array(case.shape, case.dtype)
    budget_s = 0.3 if args.quick else 0.75
    for name, call in calls.items():
        if name == "scipy" and not args.time_scipy:
            continue
        if record["checks"].get(name, "").startswith("ERROR"):
            record["errors"][name] = record["checks"][name][len("ERROR "):]
            continue
        if case.per_call:
            value, err = _bench.attempt(_bench.per_call_us, lambda: call(x), lambda: None, budget_s)
        elif args.quick:
            value, err = _bench.attempt(_bench.median_ms, lambda: time_once_ms(call, x), budget_s, 100,
                                        0, True)
        else:
            value, err = _bench.attempt(_bench.median_ms, lambda: time_once_ms(call, x), budget_s, 100)
        record["times"][name] = value
        if err:
            record["errors"][name] = err
    return record


def run_worker(args):
    """Runs every case at args.threads and writes the records to args.worker."""
    threads = int(args.threads)
    libs = load_libraries(threads)
    import gpufilt
    omp = gpufilt.info()["build"].get("cpu_threads", "?")
    print(f"[threads={threads}] gpufilt OpenMP threads: {omp}; libraries: {', '.join(libs)}",
          flush=True)
    timed = build_cases(4 if args.small else 1)
    checked = build_cases(4) if args.quick else timed
    records = []
    for case, check_case in zip(timed, checked):
        if any(part.lower() in case.name.lower() for part in args.cases.split(",")):
            print(f"[threads={threads}] ... {case.name}", flush=True)
            records.append(run_case(case, check_case, libs, args))
    with open(args.worker, "w") as f:
        json.dump({"threads": threads, "gpufilt_omp_threads": omp, "results": records}, f)


# ------------------------------------------------------------------ parent (all thread counts)

def thread_counts(spec):
    """'1,all' -> [1, os.cpu_count()], without repeats."""
    counts = [os.cpu_count() if item.strip() == "all" else int(item) for item in spec.split(",")]
    return list(dict.fromkeys(counts))


def spawn_worker(threads, args, time_scipy):
    """Runs this script as a worker with OMP_NUM_THREADS=threads; returns its JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "worker.json")
        flags = [flag for flag, on in (("--quick", args.quick), ("--small", args.small),
                                       ("--preallocated", args.preallocated), ("--time-scipy", time_scipy))
                 if on]
        command = [sys.executable, os.path.abspath(__file__), "--threads", str(threads),
                   "--worker", path, "--cases", args.cases] + flags
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1")
        subprocess.run(command, env=env, check=True)
        with open(path) as f:
            return json.load(f)


def efficiency(t1, tn, n):
    """Parallel efficiency t1 / (tN * N), or None."""
    return t1 / (tn * n) if t1 and tn else None


def summarize(runs):
    """Adds speed-ups and parallel efficiencies to each record; returns rows to print,
    case by case in the issue's order, one row per thread count."""
    single = {r["case"]: r["times"] for run in runs if run["threads"] == 1 for r in run["results"]}
    rows = []
    for index in range(len(runs[0]["results"])):
        scipy_ms = runs[0]["results"][index]["times"].get("scipy")  # timed by the first worker
        for run in runs:
            r, n = run["results"][index], run["threads"]
            r["times"].setdefault("scipy", scipy_ms)
            t, base = r["times"], single.get(r["case"], {})
            r["speedup_vs_scipy"] = _bench.ratio(t.get("scipy"), t.get("gpufilt"))
            r["speedup_vs_opencv"] = _bench.ratio(t.get("opencv"), t.get("gpufilt"))
            r["efficiency"] = {lib: efficiency(base.get(lib), t.get(lib), n)
                               for lib in ("gpufilt", "opencv")}
            rows.append(table_row(r, n))
    return rows


def table_row(r, n):
    times, errors = r["times"], r["errors"]
    cells = [r["case"], str(n)]
    cells += ["ERR" if lib in errors else _bench.fmt(times.get(lib))
              for lib in ("gpufilt", "scipy", "opencv")]
    cells += [_bench.fmt(r["speedup_vs_scipy"]), _bench.fmt(r["speedup_vs_opencv"])]
    cells += [_bench.fmt(r["efficiency"]["gpufilt"], 2), _bench.fmt(r["efficiency"]["opencv"], 2)]
    notes = [f"{lib} {text}" for lib, text in sorted(r["checks"].items())]
    notes += [f"{lib}: {e}" for lib, e in errors.items() if lib == "scipy"]
    return cells + ["; ".join(notes)]


HEADER = ["case", "thr", "gpufilt", "scipy", "opencv", "x scipy", "x opencv",
          "eff gpufilt", "eff opencv", "check"]


def print_report(rows):
    array_rows = [row for row in rows if "(per call)" not in row[0]]
    call_rows = [row for row in rows if "(per call)" in row[0]]
    print("\nmedian ms per call; x = speed-up of gpufilt; eff = t1 / (tN * N)")
    _bench.print_table(HEADER, array_rows)
    if call_rows:
        print("\nper-call overhead, us per call")
        _bench.print_table(HEADER, call_rows)


def versions():
    import platform
    import scipy
    import gpufilt
    info = {"cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
            "numpy": np.__version__, "scipy": scipy.__version__,
            "gpufilt": getattr(gpufilt, "__version__", "unknown")}
    try:
        import cv2
        info["opencv"] = cv2.__version__
    except ImportError:
        info["opencv"] = "not importable (column skipped)"
    return info


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="full-size arrays, results checked on 4x smaller ones, fewer repeats")
    parser.add_argument("--small", action="store_true", help="timed arrays 4x smaller per axis too")
    parser.add_argument("--threads", default="1,all",
                        help="comma-separated thread counts; 'all' = os.cpu_count()")
    parser.add_argument("--cases", default="", help="run only cases whose name contains one of these "
                        "(comma-separated)")
    parser.add_argument("--preallocated", action="store_true",
                        help="gpufilt and scipy write into output arrays allocated once (output=): "
                             "times without the cost of a fresh output's first touch")
    parser.add_argument("--json", help="write the results to this JSON file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: one thread count
    parser.add_argument("--time-scipy", action="store_true", help=argparse.SUPPRESS)  # internal
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    info = versions()
    print("  ".join(f"{k}: {v}" for k, v in info.items()))
    runs = [spawn_worker(n, args, index == 0) for index, n in enumerate(thread_counts(args.threads))]
    rows = summarize(runs)
    print_report(rows)
    if args.json:
        _bench.write_json(args.json, {"info": info, "quick": args.quick, "small": args.small,
                                      "preallocated": args.preallocated, "runs": runs})
    failed = sorted({row[0] for row in rows if "FAIL" in row[-1] or "ERROR" in row[-1]})
    if failed:
        print(f"\nFAIL/ERROR in {len(failed)} case(s): {', '.join(failed)}")


if __name__ == "__main__":
    main()
