"""gpufilt on Dask against dask-image, and zarr to zarr against a plain copy.

Each case runs in a fresh child process, so that its peak memory is its own:
time (median of --repeats computes), the extra peak memory of a compute
(host RSS, or the cupy memory pool's bytes on the GPU, above what the
process held before it: input and output arrays excluded), the number of
tasks in the graph, and the largest difference from gpufilt in memory.

    python benchmarks/bench_dask.py                       # CPU, 512x512x128 float32
    python benchmarks/bench_dask.py --gpu --shape 512,2048,2048 --chunks 128,1024,1024
    python benchmarks/bench_dask.py --zarr --shape 256,256,256 --chunks 64,128,128

Cases: gaussian_filter sigma 2, median_filter size 3, and a chain gaussian
sigma 1 -> sobel -> threshold; gpufilt in memory on the same volume is the
baseline "plain". --zarr: filter_zarr (gaussian sigma 2) against
dask.array.from_zarr(...).to_zarr(...) of the same volume, at 1x, 4x and
16x the volume along the first axis, to show that memory stays flat: each
run in a fresh process, --repeats times by turns, medians.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _bench import fmt, print_table, ratio, write_json  # noqa: E402


def threshold(block, level=0.05):
    return block > level


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def busy_cpu_s():
    """CPU seconds the machine has been busy, all processes together (Linux)."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


def own_cpu_s():
    times = os.times()
    return times.user + times.system


# ------------------------------------------------------------- the child

def _lazy(case, library, x):
    from gpufilt import ndimage
    from gpufilt.dask import chain
    if library == "gpufilt":
        if case == "gaussian":
            return ndimage.gaussian_filter(x, 2.0)
        if case == "median":
            return ndimage.median_filter(x, size=3)
        return chain(x, [("gaussian_filter", {"sigma": 1.0}), ("sobel", {"axis": 0}), (threshold, {}, 0)])
    from dask_image import ndfilters
    if case == "gaussian":
        return ndfilters.gaussian_filter(x, 2.0)
    if case == "median":
        return ndfilters.median_filter(x, size=3)
    return ndfilters.sobel(ndfilters.gaussian_filter(x, 1.0), axis=0) > 0.05


def _plain(case, data):
    from gpufilt import ndimage
    if case == "gaussian":
        return ndimage.gaussian_filter(data, 2.0)
    if case == "median":
        return ndimage.median_filter(data, size=3)
    return threshold(ndimage.sobel(ndimage.gaussian_filter(data, 1.0), axis=0))


def child_case(args):
    import dask
    import dask.array as da
    shape, chunks = _ints(args.shape), _ints(args.chunks)
    xp = np
    if args.gpu:
        import cupy as xp
    data = xp.random.default_rng(0).random(shape, dtype=np.float32)  # made where it is used
    expected = _plain(args.case, data)
    out = xp.empty_like(expected)
    sync = (lambda: xp.cuda.Device().synchronize()) if args.gpu else (lambda: None)
    pool = xp.get_default_memory_pool() if args.gpu else None
    times, tasks = [], None
    # name=False: no hash of the whole input (dask would copy a cupy array to the host for it)
    x = da.from_array(data, chunks=chunks, asarray=False, name=False)
    if args.library != "plain":
        tasks = len(_lazy(args.case, args.library, x).__dask_graph__())
    before = pool.total_bytes() / 2**20 if args.gpu else rss_mb()
    # On a GPU, two worker threads: one GPU runs one kernel at a time, and each
    # concurrent task holds a block and its halo in GPU memory.
    with dask.config.set(scheduler="threads", num_workers=2 if args.gpu else None):
        for _ in range(args.repeats + 1):  # the first is a warm-up (cupyx compiles its kernels)
            sync()
            start = time.perf_counter()
            if args.library == "plain":
                result = _plain(args.case, data)
                out[...] = result
                del result
            else:
                da.store(_lazy(args.case, args.library, x), out, lock=False)  # the graph built, then run
            sync()
            times.append(time.perf_counter() - start)
    times = times[1:]
    peak = (pool.total_bytes() / 2**20 if args.gpu else peak_rss_mb()) - before
    diff = float(abs(out.astype(xp.float64) - expected.astype(xp.float64)).max())
    print(json.dumps({"case": args.case, "library": args.library, "ms": 1e3 * statistics.median(times),
                      "extra_mb": peak, "tasks": tasks, "max_diff": diff}))


def child_zarr(args):
    import dask
    import dask.array as da
    import zarr
    from gpufilt.dask import filter_zarr
    source = zarr.open_array(args.source, mode="r")
    target = args.source + (".copy" if args.library == "copy" else ".out")
    before = rss_mb()
    busy, own = busy_cpu_s(), own_cpu_s()
    start = time.perf_counter()
    with dask.config.set(scheduler="threads"):
        if args.library == "copy":
            da.from_zarr(source).to_zarr(target, overwrite=True)
        else:
            filter_zarr(source, target, [("gaussian_filter", {"sigma": 2.0})], task_bytes=args.task_bytes)
    seconds = time.perf_counter() - start
    others = (busy_cpu_s() - busy) - (own_cpu_s() - own)
    print(json.dumps({"library": args.library, "gb": source.nbytes / 1e9, "s": seconds,
                      "extra_mb": peak_rss_mb() - before, "others_cpu_s": others}))
    shutil.rmtree(target)


# ------------------------------------------------------------ the parent

def _ints(text):
    return tuple(int(v) for v in text.split(","))


def _child(*argv):
    done = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_cases(args):
    rows, results = [], []
    device = ["--gpu"] if args.gpu else []
    for case in ("gaussian", "median", "chain"):
        got = {}
        for library in ("plain", "gpufilt", "dask-image"):
            got[library] = _child("--child", case, library, "--shape", args.shape, "--chunks", args.chunks,
                                  "--repeats", str(args.repeats), *device)
            results.append({"case": case, "library": library, **got[library]})
            print(json.dumps(results[-1]), flush=True)
        g, d, p = got["gpufilt"], got["dask-image"], got["plain"]
        rows.append([case, fmt(p.get("ms")), fmt(g.get("ms")), fmt(d.get("ms")),
                     fmt(ratio(d.get("ms"), g.get("ms"))), fmt(ratio(g.get("ms"), p.get("ms"))),
                     fmt(g.get("extra_mb")), fmt(d.get("extra_mb")), str(g.get("tasks")), str(d.get("tasks")),
                     f"{g.get('max_diff', float('nan')):.1e} / {d.get('max_diff', float('nan')):.1e}"])
    print(f"\n{args.shape} float32 in chunks of {args.chunks}, {'GPU (cupy chunks)' if args.gpu else 'CPU'}; "
          "ms: median of the computes; extra MB: peak above the arrays")
    print_table(["case", "plain ms", "dask+gpufilt ms", "dask-image ms", "x dask-image", "/ plain",
                 "gpufilt extra MB", "dask-image extra MB", "gpufilt tasks", "dask-image tasks",
                 "max |diff| g / d"], rows)
    return results


def _quiet_child(*argv, tries=5):
    """A timed child run again (after a pause) while other processes took
    more than a tenth of a core beside it: a shared machine's other work
    would time them, not the run."""
    for _ in range(tries):
        got = _child(*argv)
        if got.get("others_cpu_s", 0) <= 0.1 * got.get("s", 0):
            return got
        print(f"  (run again: other processes took {got['others_cpu_s']:.2f} CPU s in {got['s']:.2f} s)",
              file=sys.stderr, flush=True)
        time.sleep(10)
    return got


def _zarr_medians(path, args):
    """The copy and filter_zarr, each --repeats times in a fresh process
    (one run each, as a volume is filtered once), taking turns so that a
    slow spell of the machine hits both: the medians of time and memory."""
    extra = ["--task-bytes", str(args.task_bytes)] if args.task_bytes is not None else []
    runs = {"copy": [], "gpufilt": []}
    for _ in range(args.repeats):
        for library in runs:
            runs[library].append(_quiet_child("--child-zarr", path, library, *extra))
    got = {}
    for library, outcomes in runs.items():
        failed = [o for o in outcomes if "error" in o]
        if failed:
            got[library] = failed[0]
            continue
        got[library] = {**outcomes[0], "s": statistics.median(o["s"] for o in outcomes),
                        "extra_mb": statistics.median(o["extra_mb"] for o in outcomes),
                        "s_all": [round(o["s"], 3) for o in outcomes]}
    return got


def run_zarr(args):
    import zarr
    shape, chunks = _ints(args.shape), _ints(args.chunks)
    folder = tempfile.mkdtemp(dir=args.tmp)
    rows, results = [], []
    rng = np.random.default_rng(0)
    try:
        for scale in (1, 4, 16):
            full = (shape[0] * scale, *shape[1:])
            path = os.path.join(folder, f"x{scale}.zarr")
            source = zarr.create_array(path, shape=full, chunks=chunks, dtype="f4")
            for start in range(0, full[0], chunks[0]):
                stop = min(full[0], start + chunks[0])
                source[start:stop] = rng.random((stop - start, *full[1:]), dtype=np.float32)
            got = _zarr_medians(path, args)
            results.append({"scale": scale, **{k: v for k, v in got.items()}})
            c, g = got["copy"], got["gpufilt"]
            rows.append([f"{scale}x ({g.get('gb', 0):.2f} GB)", fmt(c.get("s")), fmt(g.get("s")),
                         fmt(ratio(g.get("s"), c.get("s"))), fmt(c.get("extra_mb")), fmt(g.get("extra_mb"))])
            shutil.rmtree(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\nzarr to zarr, chunks {args.chunks}, gaussian sigma 2 (threads scheduler, {os.cpu_count()} cores); "
          f"medians of {args.repeats} runs, each in a fresh process")
    print_table(["volume", "zarr copy s", "filter_zarr s", "/ copy", "copy extra MB", "filter_zarr extra MB"], rows)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--zarr", action="store_true")
    parser.add_argument("--shape", default=None)
    parser.add_argument("--chunks", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tmp", default=None, help="folder for the zarr volumes")
    parser.add_argument("--task-bytes", type=int, default=None, help="--zarr: filter_zarr's task_bytes")
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", nargs=2, metavar=("CASE", "LIBRARY"))
    parser.add_argument("--child-zarr", nargs=2, metavar=("SOURCE", "LIBRARY"))
    args = parser.parse_args()
    if args.child:
        args.case, args.library = args.child
        return child_case(args)
    if args.child_zarr:
        args.source, args.library = args.child_zarr
        return child_zarr(args)
    if args.zarr:
        args.shape = args.shape or "256,256,256"
        args.chunks = args.chunks or "64,128,128"
        results = run_zarr(args)
    else:
        args.shape = args.shape or "128,512,512"
        args.chunks = args.chunks or "64,256,256"
        results = run_cases(args)
    if args.json:
        write_json(args.json, {"shape": args.shape, "chunks": args.chunks, "gpu": args.gpu, "results": results})


if __name__ == "__main__":
    main()
