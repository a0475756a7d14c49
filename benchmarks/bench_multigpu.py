"""Scaling over several GPUs of one machine (gpufilt.dask), against
dask-image + cupyx.

Two volumes:

- resident: a float32 volume already on the GPUs (cupy chunks spread over
  them by gpufilt.dask.to_gpus); the result stays there (persist). Scaling
  is the 1-GPU time over the N-GPU time.
- host: a uint16 volume in host memory, larger than one GPU's memory with
  its result, streamed through the GPUs (chain(..., gpus=)) into a host
  array (dask.array.store). Reported as a fraction of the copy floor: the
  time the GPUs' PCIe links take to move the volume in and the result out,
  measured in the same run (pinned buffers, every GPU copying both ways
  at once).

Cases: gaussian_filter sigma 2, median_filter size 3, and a chain gaussian
sigma 1 -> sobel -> threshold. dask-image + cupyx runs the resident
volume's cases on one GPU (in one process it runs every block on the current
GPU; several GPUs would need dask-cuda's worker processes), and its N-GPU
figure is that time divided by N: the best it could scale.

    python benchmarks/bench_multigpu.py --gpus 1,2,4 --json results/multigpu.json
    python benchmarks/bench_multigpu.py --resident-shape 512,1024,1024 --host-shape 256,1024,1024   # quick

Each part runs in its own child process. Times are medians of --repeats
computes after a warm-up; CUDA work is complete when a compute returns.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _bench import fmt, print_table, ratio, write_json  # noqa: E402

CASES = ("gaussian", "median", "chain")


def threshold(block, level=0.05):
    return block > level


def steps_of(case):
    if case == "gaussian":
        return [("gaussian_filter", {"sigma": 2.0})]
    if case == "median":
        return [("median_filter", {"size": 3})]
    return [("gaussian_filter", {"sigma": 1.0}), ("sobel", {"axis": 0}), (threshold, {}, 0)]


def _ints(text):
    return tuple(int(v) for v in text.split(","))


def _timed_s(run, repeats):
    """(the first run's seconds, the median of `repeats` more): the first
    pays for kernels, memory pools and pinned buffers."""
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times[0], statistics.median(times[1:] or times)


# ------------------------------------------------------------- children

def _random_block(shape, dtype, seed, gpu):
    import cupy
    with cupy.cuda.Device(gpu):
        block = cupy.random.default_rng(seed).random(shape, dtype=np.float32)
        if np.dtype(dtype) != np.float32:
            block = (block * 60000).astype(dtype)
        cupy.cuda.get_current_stream().synchronize()
        return block


def resident_volume(shape, chunks, gpus):
    """A dask array of random cupy chunks made on their GPUs, through
    to_gpus (which keeps them where they are)."""
    import dask.array as da
    import cupy
    from gpufilt import _gpus
    from gpufilt.dask import to_gpus
    chunks = da.core.normalize_chunks(chunks, shape)
    on = _gpus.placement(int(np.prod([len(c) for c in chunks])), gpus)

    def make(block_info=None):
        info = block_info[None]
        k = int(np.ravel_multi_index(info["chunk-location"], info["num-chunks"]))
        return _random_block(info["chunk-shape"], np.float32, k, on[k])
    made = da.map_blocks(make, chunks=chunks, dtype=np.float32, meta=cupy.empty((0,) * len(shape), np.float32))
    return to_gpus(made, gpus).persist()


def child_resident(args):
    import dask
    import cupy
    from gpufilt.dask import chain
    shape, chunks = _ints(args.shape), _ints(args.chunks)
    out = []
    # dask-image + cupyx on one GPU runs fastest on few threads (each
    # block's cupyx calls then do not contend for the GPU and its pool):
    # --peer-workers; gpufilt takes dask's default, a thread a core.
    workers = args.peer_workers if args.library == "dask-image" else None
    with dask.config.set(scheduler="threads", num_workers=workers):
        for n in _ints(args.gpus):
            if n > cupy.cuda.runtime.getDeviceCount():
                continue
            x = resident_volume(shape, chunks, tuple(range(n)))
            for case in CASES:
                if args.library == "gpufilt":
                    def run(x=x, case=case):
                        chain(x, steps_of(case)).persist()
                else:
                    run = _dask_image_run(x, case)
                first, s = _timed_s(run, args.repeats)
                out.append({"part": "resident", "library": args.library, "case": case, "gpus": n, "s": s,
                            "first_s": first, "gb": x.nbytes / 1e9, "workers": workers})
                print(json.dumps(out[-1]), flush=True)
            x = None
            for k in range(n):
                with cupy.cuda.Device(k):
                    cupy.get_default_memory_pool().free_all_blocks()
    return out


def _dask_image_run(x, case):
    import cupy

    def run():
        _dask_image_lazy(x, case).persist()
        cupy.cuda.Device().synchronize()
    return run


def _dask_image_lazy(x, case):
    from dask_image import ndfilters
    if case == "gaussian":
        return ndfilters.gaussian_filter(x, 2.0)
    if case == "median":
        return ndfilters.median_filter(x, size=3)
    return ndfilters.sobel(ndfilters.gaussian_filter(x, 1.0), axis=0) > 0.05


def _worker_block(block_info=None):
    """A random chunk made on the worker that runs this (its GPU)."""
    info = block_info[None]
    k = int(np.ravel_multi_index(info["chunk-location"], info["num-chunks"]))
    import cupy
    return _random_block(info["chunk-shape"], np.float32, k, cupy.cuda.Device().id)


def _synchronize():
    import cupy
    cupy.cuda.Device().synchronize()


def child_cluster(args):
    """The resident cases on dask-cuda's LocalCUDACluster (one worker
    process a GPU, halos between workers over TCP), gpufilt and dask-image
    + cupyx on the same chunks."""
    import dask.array as da
    import cupy
    from dask_cuda import LocalCUDACluster
    from distributed import Client, wait
    from gpufilt.dask import chain
    shape, chunks = _ints(args.shape), _ints(args.chunks)
    out = []
    for n in _ints(args.gpus):
        if n > cupy.cuda.runtime.getDeviceCount():
            continue
        with LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(n)), dashboard_address=":0",
                              silence_logs=40) as cluster, Client(cluster) as client:
            made = da.map_blocks(_worker_block, chunks=da.core.normalize_chunks(chunks, shape), dtype=np.float32,
                                 meta=cupy.empty((0,) * len(shape), np.float32))
            x = client.persist(made)
            wait(x)
            held = sorted(len(keys) for keys in client.has_what().values())
            for case in CASES:
                for library in ("gpufilt", "dask-image"):
                    def run(x=x, case=case, library=library):
                        lazy = chain(x, steps_of(case)) if library == "gpufilt" else _dask_image_lazy(x, case)
                        wait(client.persist(lazy))
                        # A task ends when its kernels are queued (dask-image's) or done
                        # (gpufilt's): count each worker's GPU work to its end.
                        client.run(_synchronize)
                    first, s = _timed_s(run, args.repeats)
                    out.append({"part": "dask-cuda", "library": library, "case": case, "gpus": n, "s": s,
                                "first_s": first, "gb": x.nbytes / 1e9, "chunks_per_worker": held})
                    print(json.dumps(out[-1]), flush=True)
    return out


def host_volume(shape):
    """A random uint16 volume in host memory, filled in parallel from a
    random tile (numpy's generators would take minutes for tens of GB)."""
    volume = np.empty(shape, np.uint16)
    tile = np.random.default_rng(0).integers(0, 60000, (min(16, shape[0]),) + shape[1:], dtype=np.uint16)
    starts = range(0, shape[0], tile.shape[0])

    def fill(start):
        stop = min(shape[0], start + tile.shape[0])
        np.copyto(volume[start:stop], tile[:stop - start])
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(fill, starts))
    return volume


def copy_floor_s(nbytes, gpus, chunk=1 << 30, rounds=4):
    """Seconds to move nbytes to the GPUs and nbytes back over their PCIe
    links, every GPU copying both ways at once through pinned buffers."""
    import cupy
    import cupyx
    rates = {}

    def per_gpu(gpu):
        with cupy.cuda.Device(gpu):
            host_in, host_out = cupyx.empty_pinned(chunk, np.uint8), cupyx.empty_pinned(chunk, np.uint8)
            dev_in, dev_out = cupy.empty(chunk, np.uint8), cupy.empty(chunk, np.uint8)
            up, down = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
            for _ in range(2):  # warm-up, then timed
                start = time.perf_counter()
                for _ in range(rounds):
                    dev_in.set(host_in, stream=up)
                    dev_out.get(stream=down, out=host_out)
                up.synchronize()
                down.synchronize()
            rates[gpu] = rounds * chunk / (time.perf_counter() - start)  # bytes/s each way
    with ThreadPoolExecutor(len(gpus)) as pool:
        list(pool.map(per_gpu, gpus))
    return nbytes / sum(rates.values())


def child_host(args):
    import dask
    import dask.array as da
    import cupy
    from gpufilt.dask import chain
    shape, chunks = _ints(args.shape), _ints(args.chunks)
    volume = host_volume(shape)
    result = np.empty(shape, np.uint16)
    np.copyto(result, volume)  # the output's pages touched before timing
    x = da.from_array(volume, chunks=chunks, name=False)
    out = []
    with dask.config.set(scheduler="threads"):
        for n in _ints(args.gpus):
            if n > cupy.cuda.runtime.getDeviceCount():
                continue
            gpus = tuple(range(n))
            floor = copy_floor_s(volume.nbytes, gpus)
            for case in CASES:
                steps = steps_of(case)
                if case == "chain":  # a threshold's bools stored as 0/1 in the uint16 result
                    steps = steps[:2] + [(lambda b: b > 30000, {}, 0)]

                def run():
                    da.store(chain(x, steps, gpus=gpus), result, lock=False)
                first, s = _timed_s(run, args.host_repeats)
                out.append({"part": "host", "case": case, "gpus": n, "s": s, "first_s": first, "floor_s": floor,
                            "gb": volume.nbytes / 1e9})
                print(json.dumps(out[-1]), flush=True)
    return out


# ------------------------------------------------------------ the parent

def _child(*argv):
    done = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
    return rows


def _topology():
    try:
        return subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout
    except OSError:
        return ""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", default="1,2,4", help="GPU counts to run on")
    parser.add_argument("--resident-shape", default="1024,2048,2048", help="float32: 16 GiB by default")
    parser.add_argument("--resident-chunks", default="128,2048,2048")
    parser.add_argument("--host-shape", default="2048,4096,4096", help="uint16: 64 GiB by default")
    parser.add_argument("--host-chunks", default="256,1024,2048")
    parser.add_argument("--parts", default="resident,dask-image,host")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--host-repeats", type=int, default=1, help="0: the first run only")
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", choices=("resident", "host", "cluster"))
    parser.add_argument("--library", default="gpufilt")
    parser.add_argument("--peer-workers", type=int, default=2, help="dask's threads for dask-image + cupyx")
    parser.add_argument("--shape")
    parser.add_argument("--lanes", type=int, default=None, help="gpufilt._gpus.LANES_PER_GPU for this run")
    parser.add_argument("--async-pool", action="store_true", help="CuPy's allocator: cudaMallocAsync")
    parser.add_argument("--chunks")
    args = parser.parse_args()
    if args.child:
        if args.async_pool:
            import cupy
            for k in range(cupy.cuda.runtime.getDeviceCount()):
                with cupy.cuda.Device(k):
                    cupy.cuda.set_allocator(cupy.cuda.MemoryAsyncPool().malloc)
        if args.lanes:
            from gpufilt import _gpus
            _gpus.LANES_PER_GPU = _gpus.STREAMING_LANES_PER_GPU = args.lanes
        return {"resident": child_resident, "host": child_host, "cluster": child_cluster}[args.child](args)
    parts = args.parts.split(",")
    rows = []
    common = ["--gpus", args.gpus, "--repeats", str(args.repeats)]
    if args.lanes:
        common += ["--lanes", str(args.lanes)]
    if args.async_pool:
        common += ["--async-pool"]
    resident = ["--shape", args.resident_shape, "--chunks", args.resident_chunks]
    if "resident" in parts:
        rows += _child("--child", "resident", *resident, *common)
    if "dask-image" in parts:
        rows += _child("--child", "resident", "--library", "dask-image", *resident, "--gpus", "1",
                       "--repeats", str(args.repeats), "--peer-workers", str(args.peer_workers))
    if "dask-cuda" in parts:
        rows += _child("--child", "cluster", *resident, "--gpus", args.gpus, "--repeats", str(args.repeats))
    if "host" in parts:
        rows += _child("--child", "host", "--shape", args.host_shape, "--chunks", args.host_chunks, *common,
                       "--host-repeats", str(args.host_repeats))
    report(rows, args)
    if args.json:
        write_json(args.json, {"resident": [args.resident_shape, args.resident_chunks],
                               "host": [args.host_shape, args.host_chunks], "topology": _topology(), "rows": rows})


def report(rows, args):
    def find(**want):
        return next((r for r in rows if all(r.get(k) == v for k, v in want.items())), {})
    table = []
    for case in CASES:
        one = find(part="resident", library="gpufilt", case=case, gpus=1).get("s")
        peer = find(part="resident", library="dask-image", case=case, gpus=1).get("s")
        for n in _ints(args.gpus):
            s = find(part="resident", library="gpufilt", case=case, gpus=n).get("s")
            if s is None:
                continue
            table.append([case, str(n), fmt(1e3 * s), fmt(ratio(one, s)), fmt(1e3 * peer / n if peer else None),
                          fmt(ratio(peer / n if peer else None, s))])
    print(f"\nresident: {args.resident_shape} float32 on the GPUs, chunks {args.resident_chunks}; "
          "dask-image + cupyx: one GPU's time / N")
    print_table(["case", "GPUs", "gpufilt ms", "scaling", "dask-image best ms", "x dask-image"], table)
    table = []
    for case in CASES:
        for n in _ints(args.gpus):
            mine, theirs = (find(part="dask-cuda", library=lib, case=case, gpus=n).get("s")
                            for lib in ("gpufilt", "dask-image"))
            if mine is None:
                continue
            threads = find(part="resident", library="gpufilt", case=case, gpus=n).get("s")
            table.append([case, str(n), fmt(1e3 * threads if threads else None), fmt(1e3 * mine),
                          fmt(1e3 * theirs), fmt(ratio(theirs, mine))])
    if table:
        print("\ndask-cuda: the same volume on a LocalCUDACluster (a worker process a GPU, TCP between them)")
        print_table(["case", "GPUs", "gpufilt, one process ms", "gpufilt on dask-cuda ms", "dask-image ms",
                     "x dask-image"], table)
    table = []
    for case in CASES:
        one = find(part="host", case=case, gpus=1).get("s")
        for n in _ints(args.gpus):
            row = find(part="host", case=case, gpus=n)
            if not row:
                continue
            table.append([case, str(n), fmt(row["s"]), fmt(row["first_s"]), fmt(ratio(one, row["s"])),
                          fmt(row["floor_s"]), fmt(ratio(row["floor_s"], row["s"]))])
    print(f"\nhost: {args.host_shape} uint16 in host memory, chunks {args.host_chunks}, streamed through the GPUs")
    print_table(["case", "GPUs", "s", "first run s", "scaling", "copy floor s", "floor / s"], table)
    print("\n" + _topology())


if __name__ == "__main__":
    main()
