"""GPU benchmark: gpufilt.ndimage against cupyx.scipy.ndimage and cuCIM (issue 4).

What it measures, per case (the issue's list of filters and sizes):
  * the median time of one call for gpufilt, cupyx.scipy.ndimage and, when
    importable, cuCIM's vendored ndimage (cucim.skimage._vendored.ndimage;
    skimage.filters.median for the 15x15 uint8 median), all in this process
    on the same random cupy array on the current stream;
  * gpufilt's speed-up over each peer (peer time / gpufilt time);
  * the memory floor, (input bytes + output bytes) / device copy bandwidth,
    and the fraction of it gpufilt reaches (floor / gpufilt time; 1 = as fast
    as a plain copy);
  * the per-call overhead of uniform_filter on a 16-element array;
  * the speed class (issue 4: every dtype keeps float32's): gpufilt alone on
    a few 2-D and 3-D filters in float32, float16, uint8, uint16 and int16,
    each dtype's time (the median of three rounds that take the dtypes in
    turn) and its ratio to float32's. Each result is first
    checked against scipy itself (cupyx's integer uniform filters are up to
    two units off scipy's): a block from the middle of gpufilt's result
    against scipy on that block of the input plus a halo wider than the
    filters reach (float16 computed in float32 and rounded, within the test
    suite's float16 tolerance, 4e-3 of the data range).

How: gpufilt's result is first checked against cupyx's (max |diff| relative
to the data range, 1e-4 for floats, 1 unit for integers; FAIL is printed and
the run goes on). Each library then gets a warm-up call, and CUDA events
(cupy.cuda.Event) time repeated calls; the repeat count adapts so a case
takes ~0.75 s per library (peers capped at 3 repeats where they are very
slow). Copy bandwidth is the median of cupy.copyto over a 1 GiB array,
counting bytes read + written. Per-call overhead is a host timer around
thousands of back-to-back calls plus a final synchronize, divided by the
count. A library error in a case is shown in the table; the run goes on.

Usage: python benchmarks/bench_gpu.py [--quick] [--cases SUBSTRING[,SUBSTRING...]]
                                      [--no-dtypes] [--json PATH] [--png PATH]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
from dataclasses import dataclass
from typing import Callable

import numpy as np

import _bench

PEER_BUDGET_S = 0.75       # target seconds of timing per library and case
COPY_BYTES = 1 << 30       # array size for the bandwidth measurement
CLASS_DTYPES = ("float32", "float16", "uint8", "uint16", "int16")  # the speed-class table's columns
FLOAT16_TOLERANCE = 4e-3   # relative to the data range: the test suite's float16 tolerance (tests/_helpers.py)


@dataclass
class Case:
    """One benchmark: call(nd, x, weights) runs the filter with module nd."""
    name: str
    shape: tuple
    dtype: str
    call: Callable
    weights: np.ndarray | None = None   # uploaded for the peers, numpy for gpufilt
    cucim_call: Callable | None = None  # cuCIM's own entry point, if not its ndimage
    peer_max_reps: int = 200            # cap on repeats for the (slow) peers
    per_call: bool = False              # time back-to-back calls on the host instead


def size_label(shape, dtype):
    """'512^3 float32' for a cube, '16 float32' for 1-D."""
    if len(set(shape)) == 1 and len(shape) > 1:
        return f"{shape[0]}^{len(shape)} {dtype}"
    return f"{'x'.join(map(str, shape))} {dtype}"


def skimage_median(size):
    """cuCIM's skimage.filters.median with a size x size square and scipy's default mode."""
    def call(nd, x, weights):
        import cupy
        from cucim.skimage.filters import median
        return median(x, footprint=cupy.ones((size, size), dtype=bool), mode="reflect")
    return call


def build_cases(quick):
    """The issue's cases; --quick shrinks 512^3 -> 256^3, 256^3 -> 128^3, 8192^2 -> 4096^2."""
    big3 = (256,) * 3 if quick else (512,) * 3
    mid3 = (128,) * 3 if quick else (256,) * 3
    big2 = (4096,) * 2 if quick else (8192,) * 2
    weights = np.random.default_rng(1).random((5, 5, 5))

    def case(name, shape, dtype, call, **options):
        return Case(f"{name} {size_label(shape, dtype)}", shape, dtype, call, **options)
    return [
        case("gaussian_filter sigma=1", big3, "float32", lambda nd, x, w: nd.gaussian_filter(x, 1)),
        case("gaussian_filter sigma=4", big3, "float32", lambda nd, x, w: nd.gaussian_filter(x, 4)),
        case("uniform_filter size=3", big3, "float32", lambda nd, x, w: nd.uniform_filter(x, 3)),
        case("uniform_filter size=9", big3, "float32", lambda nd, x, w: nd.uniform_filter(x, 9)),
        case("sobel axis=0", big3, "float32", lambda nd, x, w: nd.sobel(x, axis=0)),
        # scipy's default axis, -1: the passes out of axis order
        case("sobel axis=-1", big3, "float32", lambda nd, x, w: nd.sobel(x)),
        case("sobel axis=-1", big2, "float32", lambda nd, x, w: nd.sobel(x)),
        case("laplace", big3, "float32", lambda nd, x, w: nd.laplace(x)),
        case("maximum_filter size=3", big3, "float32", lambda nd, x, w: nd.maximum_filter(x, 3)),
        case("median_filter size=3", mid3, "float32", lambda nd, x, w: nd.median_filter(x, 3)),
        case("median_filter size=5", mid3, "float32", lambda nd, x, w: nd.median_filter(x, 5)),
        case("convolve 5x5x5 weights", mid3, "float32", lambda nd, x, w: nd.convolve(x, w),
             weights=weights),
        case("gaussian_filter sigma=2", big2, "float32", lambda nd, x, w: nd.gaussian_filter(x, 2)),
        case("gaussian_filter sigma=2", big2, "uint8", lambda nd, x, w: nd.gaussian_filter(x, 2)),
        case("median_filter size=5", big2, "float32", lambda nd, x, w: nd.median_filter(x, 5)),
        case("median_filter size=15", big2, "uint8", lambda nd, x, w: nd.median_filter(x, 15),
             cucim_call=skimage_median(15), peer_max_reps=3),
        case("uniform_filter size=3 (per call)", (16,), "float32",
             lambda nd, x, w: nd.uniform_filter(x, 3), per_call=True),
    ]


def speed_class_cases(quick):
    """(name, shape, call(nd, x)) of the filters the speed-class table times in every dtype."""
    vol = (128,) * 3 if quick else (256,) * 3
    img = (4096,) * 2 if quick else (8192,) * 2
    return [
        ("gaussian_filter sigma=1", vol, lambda nd, x: nd.gaussian_filter(x, 1)),
        ("sobel axis=0", vol, lambda nd, x: nd.sobel(x, axis=0)),
        ("uniform_filter size=5", vol, lambda nd, x: nd.uniform_filter(x, 5)),
        ("maximum_filter size=3", vol, lambda nd, x: nd.maximum_filter(x, 3)),
        ("median_filter size=3", vol, lambda nd, x: nd.median_filter(x, 3)),
        ("gaussian_filter sigma=2", img, lambda nd, x: nd.gaussian_filter(x, 2)),
    ]


# ------------------------------------------------------------------ libraries and device

def load_libraries():
    """{'gpufilt': module, 'cupyx': module, 'cucim': module (when importable)}."""
    import cupyx.scipy.ndimage
    from gpufilt import ndimage
    libs = {"gpufilt": ndimage, "cupyx": cupyx.scipy.ndimage}
    try:
        from cucim.skimage._vendored import ndimage as cucim_ndimage
        libs["cucim"] = cucim_ndimage
    except ImportError as err:
        print(f"cuCIM not importable ({err}); its column is skipped")
    return libs


def nvidia_driver():
    """The driver version nvidia-smi reports, or 'unknown'."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout
        return out.split()[0] if out.split() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def cuda_version(number):
    """12040 -> '12.4'."""
    return f"{number // 1000}.{number % 1000 // 10}"


def device_info():
    """Device name and software versions, printed at the top and saved in the JSON."""
    import cupy
    import gpufilt
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return {"device": name, "cupy": cupy.__version__,
            "gpufilt": getattr(gpufilt, "__version__", "unknown"),
            "driver": nvidia_driver(),
            "cuda_driver_api": cuda_version(cupy.cuda.runtime.driverGetVersion()),
            "cuda_runtime": cuda_version(cupy.cuda.runtime.runtimeGetVersion())}


def random_array(shape, dtype):
    """Uniform random data on the device: [0, 1) floats, integers over the dtype's whole range."""
    import cupy
    x = cupy.random.random(shape, dtype=cupy.float32)
    if np.dtype(dtype).kind not in "ui":
        return x.astype(dtype, copy=False)
    info = np.iinfo(dtype)
    return (x * (float(info.max) - info.min + 1) + info.min).astype(dtype)


def free_device_memory():
    """Returns cached blocks to the driver so the next case starts clean."""
    import cupy
    cupy.get_default_memory_pool().free_all_blocks()


# ------------------------------------------------------------------ timing

def event_ms(call):
    """Milliseconds of one call() on the current stream, by CUDA events."""
    import cupy
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    call()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end)


def copy_bandwidth():
    """Device-to-device copy bandwidth in bytes/s (bytes read + written)."""
    import cupy
    src = cupy.random.random(COPY_BYTES // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    ms = _bench.median_ms(lambda: event_ms(lambda: cupy.copyto(dst, src)), budget_s=0.5)
    nbytes = 2 * src.nbytes
    del src, dst
    free_device_memory()
    return nbytes / (ms / 1e3)


def synchronize():
    import cupy
    cupy.cuda.Device().synchronize()


# ------------------------------------------------------------------ one case

def bind(case, lib_name, nd):
    """call(x) for one library; weights as numpy for gpufilt, on the device for peers."""
    import cupy
    weights = case.weights
    if weights is not None and lib_name != "gpufilt":
        weights = cupy.asarray(weights)
    if lib_name == "cucim" and case.cucim_call is not None:
        return lambda x: case.cucim_call(nd, x, weights)
    return lambda x: case.call(nd, x, weights)


def check(calls, x):
    """(check text, output bytes) comparing gpufilt's result with cupyx's."""
    out, err = _bench.attempt(calls["gpufilt"], x)
    ref, ref_err = _bench.attempt(calls["cupyx"], x)
    produced = out if out is not None else ref
    out_bytes = produced.nbytes if produced is not None else x.nbytes
    if err:
        return f"ERROR {err}", out_bytes
    if ref_err:
        return f"unchecked (cupyx: {ref_err})", out_bytes
    return _bench.check_text(out, ref), out_bytes


def time_library(case, name, call, x, budget_s):
    """(median ms or us per call, error text or None) for one library."""
    if case.per_call:
        return _bench.attempt(_bench.per_call_us, lambda: call(x), synchronize, budget_s)
    max_reps = 200 if name == "gpufilt" else case.peer_max_reps
    return _bench.attempt(_bench.median_ms, lambda: event_ms(lambda: call(x)), budget_s, max_reps)


def run_case(case, libs, bandwidth, budget_s):
    """Checks and times one case for every library; returns its result record."""
    x = random_array(case.shape, case.dtype)
    calls = {name: bind(case, name, nd) for name, nd in libs.items()}
    check_result, out_bytes = check(calls, x)
    record = {"case": case.name, "shape": list(case.shape), "dtype": case.dtype,
              "per_call": case.per_call, "check": check_result, "times": {}, "errors": {}}
    for name, call in calls.items():
        if name == "gpufilt" and check_result.startswith("ERROR"):
            record["errors"][name] = check_result[len("ERROR "):]
            continue
        value, err = time_library(case, name, call, x, budget_s)
        record["times"][name] = value
        if err:
            record["errors"][name] = err
    if not case.per_call:
        floor_ms = (x.nbytes + out_bytes) / bandwidth * 1e3
        record["floor_ms"] = floor_ms
        record["floor_fraction"] = _bench.ratio(floor_ms, record["times"].get("gpufilt"))
    record["speedup"] = {peer: _bench.ratio(record["times"].get(peer), record["times"].get("gpufilt"))
                         for peer in libs if peer != "gpufilt"}
    del x, calls
    free_device_memory()
    return record


def check_against_scipy(call, x, out, block=48, halo=16):
    """check_text of a block of `out` (gpufilt's result for the device array
    x) from the middle against scipy's on that block of x plus `halo` more
    a side: a filter reaching less than the halo gives the block the same
    values either way, whatever the boundary mode."""
    import cupy
    import scipy.ndimage
    inner = tuple(slice(n // 2 - block // 2, n // 2 + block // 2) for n in x.shape)
    outer = tuple(slice(s.start - halo, s.stop + halo) for s in inner)
    host = cupy.asnumpy(x[outer])
    half = host.dtype == np.float16  # scipy refuses float16: float32, rounded
    expected = call(scipy.ndimage, host.astype(np.float32) if half else host)
    expected = expected[(slice(halo, -halo),) * x.ndim]
    if half:
        expected = expected.astype(np.float16)
    tolerance = FLOAT16_TOLERANCE if half else _bench.FLOAT_TOLERANCE
    return _bench.check_text(cupy.asnumpy(out[inner]), expected, float_tolerance=tolerance)


CLASS_ROUNDS = 3  # the speed class's dtypes timed in turn, this many times


def run_speed_class(name, shape, call, gpufilt, budget_s):
    """gpufilt's ms of one filter in every CLASS_DTYPES dtype, each result
    checked against scipy's first; its record. The dtypes are timed in turn,
    CLASS_ROUNDS times, and each keeps the median of its rounds' medians:
    one round a dtype let a slower minute of the device land on one dtype
    alone (single cells moved 10-30% between runs)."""
    record = {"case": f"{name} {'x'.join(map(str, shape))}", "times": {}, "checks": {}}
    inputs = {}
    for dtype in CLASS_DTYPES:
        x = random_array(shape, dtype)
        out, err = _bench.attempt(call, gpufilt, x)
        if err:
            record["checks"][dtype] = f"ERROR {err}"
            continue
        record["checks"][dtype], check_err = _bench.attempt(check_against_scipy, call, x, out)
        if check_err:
            record["checks"][dtype] = f"unchecked (scipy: {check_err})"
        inputs[dtype] = x
        del out
    rounds = {dtype: [] for dtype in inputs}
    for _ in range(CLASS_ROUNDS):
        for dtype, x in inputs.items():
            t, _ = _bench.attempt(_bench.median_ms, lambda: event_ms(lambda: call(gpufilt, x)),
                                  budget_s / CLASS_ROUNDS)
            if t is not None:
                rounds[dtype].append(t)
    record["times"] = {dtype: statistics.median(ts) for dtype, ts in rounds.items() if ts}
    del inputs
    free_device_memory()
    base = record["times"].get("float32")
    record["ratio"] = {dtype: _bench.ratio(t, base) for dtype, t in record["times"].items()}
    return record


# ------------------------------------------------------------------ report

def table_row(record, peers):
    """One printed row: times, speed-ups, floor, check (errors shown as ERR)."""
    times, errors = record["times"], record["errors"]
    cells = [record["case"]]
    cells += ["ERR" if lib in errors else _bench.fmt(times.get(lib)) for lib in ["gpufilt"] + peers]
    cells += [_bench.fmt(record["speedup"].get(p)) for p in peers]
    cells += [_bench.fmt(record.get("floor_ms")), _bench.fmt(record.get("floor_fraction"), 2)]
    notes = [record["check"]] + [f"{lib}: {e}" for lib, e in errors.items() if lib != "gpufilt"]
    return cells + ["; ".join(notes)]


def print_report(records, peers):
    """Array cases in ms, then per-call cases in us."""
    header = ["case", "gpufilt"] + peers + [f"x vs {p}" for p in peers] + ["floor", "frac", "check"]
    array_rows = [table_row(r, peers) for r in records if not r["per_call"]]
    call_rows = [table_row(r, peers)[:len(peers) * 2 + 2] + [r["check"]]
                 for r in records if r["per_call"]]
    if array_rows:
        print("\nmedian ms per call; x = speed-up of gpufilt; floor = copy-bound ms; "
              "frac = floor / gpufilt time")
        _bench.print_table(header, array_rows)
    if call_rows:
        print("\nper-call overhead, us per call")
        _bench.print_table(header[:len(peers) * 2 + 2] + ["check"], call_rows)


def print_speed_class(records):
    """gpufilt's ms per dtype and the ratio to float32's (1 = float32's speed)."""
    print("\nspeed class: gpufilt ms per call (time / float32's time)")
    rows = []
    for r in records:
        cells = [r["case"]]
        for dtype in CLASS_DTYPES:
            t, x = r["times"].get(dtype), r["ratio"].get(dtype)
            cells.append(f"{_bench.fmt(t)} ({_bench.fmt(x, 2)})" if t is not None else "ERR")
        rows.append(cells + ["; ".join(f"{d} {c}" for d, c in r["checks"].items() if not c.startswith("ok"))
                             or "ok"])
    _bench.print_table(["case"] + list(CLASS_DTYPES) + ["check"], rows)


def save_png(path, records):
    """Horizontal bars of gpufilt's speed-up over cupyx (log scale)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib not importable; {path} not written")
        return
    shown = [r for r in records if r["speedup"].get("cupyx")]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(shown) + 1.5))
    ax.barh([r["case"] for r in shown], [r["speedup"]["cupyx"] for r in shown])
    ax.axvline(1.0, color="k", linewidth=0.8)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("speed-up of gpufilt over cupyx.scipy.ndimage (x)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="smaller arrays (256^3, 128^3, 4096^2) for a fast check")
    parser.add_argument("--cases", default="", help="run only cases whose name contains one of these comma-separated strings")
    parser.add_argument("--no-dtypes", action="store_true", help="skip the speed-class table")
    parser.add_argument("--json", help="write the results to this JSON file")
    parser.add_argument("--png", help="write a bar chart of speed-ups over cupyx")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    info = device_info()
    print("  ".join(f"{k}: {v}" for k, v in info.items()))
    libs = load_libraries()
    peers = [name for name in libs if name != "gpufilt"]
    bandwidth = copy_bandwidth()
    print(f"device-to-device copy: {bandwidth / 1e12:.3f} TB/s (read + write)")
    wanted = [w.strip().lower() for w in args.cases.split(",")]
    cases = [c for c in build_cases(args.quick) if any(w in c.name.lower() for w in wanted)]
    records = []
    for case in cases:
        print(f"... {case.name}", flush=True)
        records.append(run_case(case, libs, bandwidth, PEER_BUDGET_S))
    class_records = []
    if not args.no_dtypes:
        for name, shape, call in speed_class_cases(args.quick):
            if any(w in name.lower() for w in wanted):
                print(f"... speed class: {name}", flush=True)
                class_records.append(run_speed_class(name, shape, call, libs["gpufilt"], PEER_BUDGET_S / 2))
    print_report(records, peers)
    if class_records:
        print_speed_class(class_records)
    if args.json:
        _bench.write_json(args.json, {"info": info, "copy_bandwidth_Bps": bandwidth,
                                      "quick": args.quick, "results": records, "speed_class": class_records})
    if args.png:
        save_png(args.png, records)
    failed = [r["case"] for r in records if not r["check"].startswith("ok")]
    failed += [f"{r['case']} {d}" for r in class_records for d, c in r["checks"].items() if not c.startswith("ok")]
    if failed:
        print(f"\nFAIL/ERROR in {len(failed)} case(s): {', '.join(failed)}")


if __name__ == "__main__":
    main()
