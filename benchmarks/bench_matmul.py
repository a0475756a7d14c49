"""matmul benchmark (issue 6): gpufilt.ops.matmul against numpy.matmul on the
CPU and against cupy.matmul and torch.matmul on the GPU, on N x N float32
(N = 4096 by default). The issue's target: within 10% of the peer's time.

What it measures, per row: the median time of one call of gpufilt and of the
peer, in this process, on the same random arrays; the ratio gpufilt / peer
(<= 1.10 meets the target); gpufilt's throughput, 2 N^3 / time.

How: gpufilt's result is first checked against the peer's (max |diff|
relative to the data range, 1e-4; FAIL is printed and the run goes on). Each
call then gets a warm-up, and repeats are timed: on the CPU with a host timer
around one call (both libraries run on the same BLAS, numpy's, with its own
threads); on the GPU with CUDA events recorded on the current stream around
one call (cupy.cuda.Event for cupy arrays, torch.cuda.Event for torch
tensors; gpufilt runs on the same stream, on the same arrays). Both sides
allocate their result, as numpy.matmul / cupy.matmul / torch.matmul do;
`gpufilt out=` rows time the product into a preallocated array. float32 runs
without TF32 on both sides (cupy's default; torch's allow_tf32 is set False).

Usage: python benchmarks/bench_matmul.py [--size N] [--dtype float32]
                                         [--cpu-only | --gpu-only] [--json PATH]
"""
from __future__ import annotations

import argparse
import os
import platform

import numpy as np

import _bench

import gpufilt.ops as ops
from gpufilt import _dispatch
from gpufilt._ops_matmul import blas_info

CPU_BUDGET_S = 5.0    # seconds of timing per library on the CPU
GPU_BUDGET_S = 1.0    # and on the GPU


def tflops(n, ms):
    return None if not ms else 2 * n ** 3 / (ms * 1e-3) / 1e12


def row(device, peer, n, dtype, ours_ms, peer_ms, check):
    return {"device": device, "peer": peer, "size": f"{n}^2 {dtype}", "gpufilt_ms": ours_ms,
            "peer_ms": peer_ms, "ratio": _bench.ratio(ours_ms, peer_ms), "gpufilt_tflops": tflops(n, ours_ms),
            "check": check}


# ---------------------------------------------------------------------- CPU

def host_ms(call):
    """Median wall time of call(), in ms, on the host timer."""
    import time

    def once():
        start = time.perf_counter()
        call()
        return (time.perf_counter() - start) * 1e3
    return _bench.median_ms(once, budget_s=CPU_BUDGET_S, max_reps=50)


def cpu_rows(n, dtype, rng):
    a = rng.standard_normal((n, n)).astype(dtype)
    b = rng.standard_normal((n, n)).astype(dtype)
    out = np.empty((n, n), dtype)
    check = _bench.check_text(ops.matmul(a, b), np.matmul(a, b))
    numpy_ms = host_ms(lambda: np.matmul(a, b))
    ours_ms = host_ms(lambda: ops.matmul(a, b))
    out_ms = host_ms(lambda: ops.matmul(a, b, out=out))
    return [row("cpu", "numpy.matmul", n, dtype, ours_ms, numpy_ms, check),
            row("cpu", "numpy.matmul (gpufilt out=)", n, dtype, out_ms, numpy_ms, check)]


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# ---------------------------------------------------------------------- GPU

def cupy_event_ms(call):
    import cupy

    def once():
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        call()
        stop.record()
        stop.synchronize()
        return cupy.cuda.get_elapsed_time(start, stop)
    return _bench.median_ms(once, budget_s=GPU_BUDGET_S, max_reps=200)


def torch_event_ms(call):
    import torch

    def once():
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop)
    return _bench.median_ms(once, budget_s=GPU_BUDGET_S, max_reps=200)


def cupy_rows(n, dtype, rng):
    import cupy
    a = cupy.asarray(rng.standard_normal((n, n)).astype(dtype))
    b = cupy.asarray(rng.standard_normal((n, n)).astype(dtype))
    out = cupy.empty((n, n), dtype)
    check = _bench.check_text(cupy.asnumpy(ops.matmul(a, b)), cupy.asnumpy(cupy.matmul(a, b)))
    peer_ms = cupy_event_ms(lambda: cupy.matmul(a, b))
    ours_ms = cupy_event_ms(lambda: ops.matmul(a, b))
    out_ms = cupy_event_ms(lambda: ops.matmul(a, b, out=out))
    return [row("cuda", "cupy.matmul", n, dtype, ours_ms, peer_ms, check),
            row("cuda", "cupy.matmul (gpufilt out=)", n, dtype, out_ms, peer_ms, check)]


def torch_rows(n, dtype, rng):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    tdtype = getattr(torch, dtype)
    a = torch.from_numpy(rng.standard_normal((n, n)).astype(np.float32)).to("cuda", tdtype)
    b = torch.from_numpy(rng.standard_normal((n, n)).astype(np.float32)).to("cuda", tdtype)
    check = _bench.check_text(ops.matmul(a, b).float().cpu().numpy(), torch.matmul(a, b).float().cpu().numpy())
    peer_ms = torch_event_ms(lambda: torch.matmul(a, b))
    ours_ms = torch_event_ms(lambda: ops.matmul(a, b))
    return [row("cuda", "torch.matmul", n, dtype, ours_ms, peer_ms, check)]


def gpu_rows(n, dtype, rng):
    rows = []
    for name, make in (("cupy", cupy_rows), ("torch", torch_rows)):
        got, err = _bench.attempt(make, n, dtype, rng)
        rows += got if got else [row("cuda", f"{name}.matmul", n, dtype, None, None, f"FAIL {err}")]
    return rows


def gpu_name():
    import cupy
    return cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode()


# --------------------------------------------------------------------- main

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--dtype", default="float32")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--cpu-only", action="store_true")
    group.add_argument("--gpu-only", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    rng = np.random.default_rng(20261123)

    payload = {"benchmark": "matmul", "size": args.size, "dtype": args.dtype, "rows": []}
    if not args.gpu_only:
        payload["cpu"] = {"name": cpu_name(), "cores": os.cpu_count(), "blas": blas_info(_dispatch._core)}
        print(f"CPU: {payload['cpu']['name']}, {os.cpu_count()} cores, BLAS {payload['cpu']['blas']['library']}")
        payload["rows"] += cpu_rows(args.size, args.dtype, rng)
    if not args.cpu_only:
        module, err = _bench.attempt(_dispatch.cuda_module)
        if module is None:
            print(f"GPU: skipped ({err})")
        else:
            ops.matmul(np.ones((1, 1), np.float32), np.ones((1, 1), np.float32))  # CPU BLAS, if not yet
            payload["gpu"] = {"name": gpu_name()}
            print(f"GPU: {payload['gpu']['name']}")
            payload["rows"] += gpu_rows(args.size, args.dtype, rng)
            payload["gpu"]["cublas"] = _bench.attempt(blas_info, module)[0]
            print(f"cuBLAS: {(payload['gpu']['cublas'] or {}).get('library')}")

    header = ["device", "peer", "size", "gpufilt ms", "peer ms", "gpufilt/peer", "gpufilt TFLOP/s", "check"]
    _bench.print_table(header, [[r["device"], r["peer"], r["size"], _bench.fmt(r["gpufilt_ms"]),
                                 _bench.fmt(r["peer_ms"]), _bench.fmt(r["ratio"]), _bench.fmt(r["gpufilt_tflops"]),
                                 r["check"]] for r in payload["rows"]])
    if args.json:
        _bench.write_json(args.json, payload)


if __name__ == "__main__":
    main()
