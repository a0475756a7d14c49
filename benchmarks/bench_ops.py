"""GPU benchmark of gpufilt.ops' memory-bound kernels (issue 6) against cupy
and torch, as a fraction of the device-to-device copy bandwidth.

What it measures, per operation on 2^28 float32 elements (a 65536 x 4096
matrix for the row operations: softmax, log_softmax, cross-entropy, gather):
  * the median time of one call of gpufilt, cupy (cupy / cupyx.scipy.special)
    and torch, in this process, on the same device memory (torch tensors are
    zero-copy DLPack views of the cupy arrays);
  * the bytes the operation must move (each input read once, each output
    written once) divided by the time: the effective bandwidth;
  * that bandwidth as a fraction of the measured copy bandwidth (the issue's
    target: 0.8 or more), and gpufilt's speed-up over each peer.

How: gpufilt's result is first compared with the first peer's on the device
(max |diff| relative to the data range, 1e-4; FAIL is printed and the run
goes on). All libraries run on the legacy default stream; CUDA events
(cupy.cuda.Event) around one call, a warm-up first, repeats for ~0.5 s, the
median reported. Copy bandwidth: cupy.copyto over a 1 GiB array, bytes read +
written. A peer without the operation shows '-'.

gpufilt is also timed "queued": QUEUED_CALLS calls back to back between two
events, no host wait between them, per call. While the host keeps ahead of
the device that is the kernels' own time; a per-call time well above it
means host work inside the call (launch set-up, temporaries) shows up in
the single-call figure.

Usage: python benchmarks/bench_ops.py [--log2-size 28] [--only KEY,KEY] [--cases SUBSTRING] [--json PATH]
(keys: the first column of --list; e.g. --only sum,sum_axis0,softmax_cross_entropy)
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

import _bench
from bench_gpu import copy_bandwidth, device_info, event_ms, free_device_memory

ROW_LENGTH = 4096   # classes / row length of the row operations
BUDGET_S = 0.5
QUEUED_CALLS = 20


@dataclass
class Op:
    """One operation: calls[lib](data) runs it; nbytes(data) is what it must move;
    key names it for --only."""
    key: str
    name: str
    nbytes: Callable
    calls: dict


def make_data(n):
    """The arrays every operation draws from, on the device (cupy) plus torch views."""
    import cupy
    import torch
    rows = n // ROW_LENGTH
    x = cupy.random.standard_normal(n, dtype=cupy.float32)
    d = {"x": x, "y": cupy.random.random(n, dtype=cupy.float32),
         "g": cupy.random.standard_normal(n, dtype=cupy.float32),
         "out": cupy.empty(n, cupy.float32),
         "row": cupy.random.random(ROW_LENGTH, dtype=cupy.float32),
         "labels": cupy.random.randint(0, ROW_LENGTH, rows).astype(cupy.int64),
         "index": cupy.random.randint(0, rows, rows).astype(cupy.int64)}
    d["X"] = x.reshape(rows, ROW_LENGTH)
    d["OUT"] = d["out"].reshape(rows, ROW_LENGTH)
    for key in list(d):
        d["t_" + key] = torch.from_dlpack(d[key])
    return d


def four(n_arrays):
    """Bytes of n_arrays float32 arrays of the data's size."""
    return lambda d: 4 * d["x"].size * n_arrays


def build_ops():
    import cupy
    import cupyx.scipy.special as special
    import torch
    import torch.nn.functional as F

    from gpufilt import ops

    def ce_grad_cupy(d):
        p = special.softmax(d["X"], axis=-1)
        p[cupy.arange(p.shape[0]), d["labels"]] -= 1
        return p / p.shape[0]

    return [
        Op("fill", "fill", four(1),
           {"gpufilt": lambda d: ops.fill(d["out"], 1.5),
            "cupy": lambda d: (d["out"].fill(1.5), d["out"])[1],
            "torch": lambda d: d["t_out"].fill_(1.5)}),
        Op("broadcast_to", "broadcast_to (row -> matrix)", four(1),
           {"gpufilt": lambda d: ops.broadcast_to(d["row"], d["OUT"]),
            "cupy": lambda d: (cupy.copyto(d["OUT"], d["row"]), d["OUT"])[1],
            "torch": lambda d: d["t_OUT"].copy_(d["t_row"].expand_as(d["t_OUT"]))}),
        Op("add", "add", four(3),
           {"gpufilt": lambda d: ops.add(d["x"], d["y"], out=d["out"]),
            "cupy": lambda d: cupy.add(d["x"], d["y"], out=d["out"]),
            "torch": lambda d: torch.add(d["t_x"], d["t_y"], out=d["t_out"])}),
        Op("multiply_scalar", "multiply by scalar", four(2),
           {"gpufilt": lambda d: ops.multiply(d["x"], 0.5, out=d["out"]),
            "cupy": lambda d: cupy.multiply(d["x"], 0.5, out=d["out"]),
            "torch": lambda d: torch.mul(d["t_x"], 0.5, out=d["t_out"])}),
        Op("sum", "sum (all)", four(1),
           {"gpufilt": lambda d: ops.sum(d["x"]),
            "cupy": lambda d: d["x"].sum(),
            "torch": lambda d: d["t_x"].sum()}),
        Op("sum_axis0", "sum (axis=0)", four(1),
           {"gpufilt": lambda d: ops.sum(d["X"], axis=0),
            "cupy": lambda d: d["X"].sum(axis=0),
            "torch": lambda d: d["t_X"].sum(dim=0)}),
        Op("relu", "relu", four(2),
           {"gpufilt": lambda d: ops.relu(d["x"], out=d["out"]),
            "cupy": lambda d: cupy.maximum(d["x"], 0, out=d["out"]),
            "torch": lambda d: torch.relu(d["t_x"])}),
        Op("relu_grad", "relu_grad", four(3),
           {"gpufilt": lambda d: ops.relu_grad(d["x"], d["g"], out=d["out"]),
            "cupy": lambda d: cupy.multiply(d["g"], d["x"] > 0, out=d["out"]),
            "torch": lambda d: torch.ops.aten.threshold_backward(d["t_g"], d["t_x"], 0)}),
        Op("sigmoid", "sigmoid", four(2),
           {"gpufilt": lambda d: ops.sigmoid(d["x"], out=d["out"]),
            "cupy": lambda d: special.expit(d["x"], out=d["out"]),
            "torch": lambda d: torch.sigmoid(d["t_x"], out=d["t_out"])}),
        Op("sigmoid_grad", "sigmoid_grad", four(3),
           {"gpufilt": lambda d: ops.sigmoid_grad(d["y"], d["g"], out=d["out"]),
            "torch": lambda d: torch.ops.aten.sigmoid_backward(d["t_g"], d["t_y"])}),
        Op("softmax", "softmax (rows)", four(2),
           {"gpufilt": lambda d: ops.softmax(d["X"], out=d["OUT"]),
            "cupy": lambda d: special.softmax(d["X"], axis=-1),
            "torch": lambda d: torch.softmax(d["t_X"], dim=-1)}),
        Op("log_softmax", "log_softmax (rows)", four(2),
           {"gpufilt": lambda d: ops.log_softmax(d["X"], out=d["OUT"]),
            "cupy": lambda d: special.log_softmax(d["X"], axis=-1),
            "torch": lambda d: torch.log_softmax(d["t_X"], dim=-1)}),
        Op("softmax_cross_entropy", "softmax_cross_entropy", four(1),
           {"gpufilt": lambda d: ops.softmax_cross_entropy(d["X"], d["labels"]),
            "torch": lambda d: F.cross_entropy(d["t_X"], d["t_labels"])}),
        Op("softmax_cross_entropy_grad", "softmax_cross_entropy_grad", four(2),
           {"gpufilt": lambda d: ops.softmax_cross_entropy_grad(d["X"], d["labels"], out=d["OUT"]),
            "cupy": ce_grad_cupy}),
        Op("gather", "gather (rows)", four(2),
           {"gpufilt": lambda d: ops.gather(d["X"], d["index"], axis=0, out=d["OUT"]),
            "cupy": lambda d: cupy.take(d["X"], d["index"], axis=0, out=d["OUT"]),
            "torch": lambda d: torch.index_select(d["t_X"], 0, d["t_index"])}),
    ]


def as_cupy(result):
    import cupy
    return cupy.from_dlpack(result) if not isinstance(result, cupy.ndarray) else result


def device_check(result, reference):
    """'ok rel=...' or 'FAIL ...': max |diff| relative to the reference's range
    (or magnitude, for a sum), on the device."""
    try:
        a, b = as_cupy(result).astype("float64"), as_cupy(reference).astype("float64")
        if a.shape != b.shape:
            return f"FAIL shape {a.shape} vs {b.shape}"
        scale = max(float(b.max() - b.min()), float(abs(b).max())) or 1.0
        rel = float(abs(a - b).max()) / scale
    except Exception as err:  # noqa: BLE001 - a check must not stop the run
        return f"FAIL check raised {type(err).__name__}: {err}"
    return ("ok" if rel <= _bench.FLOAT_TOLERANCE else "FAIL") + f" rel={rel:.1e}"


def queued_ms(call, calls=QUEUED_CALLS):
    """Milliseconds per call of `calls` calls back to back between two events."""
    import cupy
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(calls):
        call()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / calls


def run_op(op, data, bandwidth):
    """Checks gpufilt against the first peer, then times every library."""
    peer = next(name for name in op.calls if name != "gpufilt")
    ours, err = _bench.attempt(lambda: as_cupy(op.calls["gpufilt"](data)).copy())  # peers reuse `out`
    ref, ref_err = _bench.attempt(op.calls[peer], data)
    check = (f"ERROR {err}" if err else f"unchecked ({peer}: {ref_err})" if ref_err
             else device_check(ours, ref) + f" vs {peer}")
    del ours, ref
    record = {"op": op.name, "bytes": op.nbytes(data), "check": check, "times": {}, "errors": {}}
    for name, call in op.calls.items():
        ms, err = _bench.attempt(_bench.median_ms, lambda: event_ms(lambda: call(data)), BUDGET_S)
        record["times"][name] = ms
        if err:
            record["errors"][name] = err
    ours = op.calls["gpufilt"]
    ms, err = _bench.attempt(_bench.median_ms, lambda: queued_ms(lambda: ours(data)), BUDGET_S)
    record["queued_ms"] = ms
    if err:
        record["errors"]["gpufilt queued"] = err
    floor_ms = record["bytes"] / bandwidth * 1e3
    record["fraction"] = {name: _bench.ratio(floor_ms, ms) for name, ms in record["times"].items()}
    record["queued_fraction"] = _bench.ratio(floor_ms, record["queued_ms"])
    record["speedup"] = {name: _bench.ratio(record["times"].get(name), record["times"].get("gpufilt"))
                         for name in ("cupy", "torch")}
    return record


def print_report(records):
    libs = ["gpufilt", "cupy", "torch"]
    header = (["op", "GB"] + [f"{lib} ms" for lib in libs] + [f"{lib} frac" for lib in libs]
              + ["gpufilt queued ms", "queued frac", "x vs cupy", "x vs torch", "check"])
    rows = []
    for r in records:
        times = [("ERR" if lib in r["errors"] else _bench.fmt(r["times"].get(lib))) for lib in libs]
        fractions = [_bench.fmt(r["fraction"].get(lib), 2) for lib in libs]
        speedups = [_bench.fmt(r["speedup"].get(p)) for p in ("cupy", "torch")]
        notes = [r["check"]] + [f"{lib}: {e}" for lib, e in r["errors"].items()]
        queued = [_bench.fmt(r.get("queued_ms")), _bench.fmt(r.get("queued_fraction"), 2)]
        rows.append([r["op"], f"{r['bytes'] / 1e9:.2f}"] + times + fractions + queued + speedups
                    + ["; ".join(notes)])
    print("\nmedian ms per call; frac = copy-bandwidth floor / time (target >= 0.8); x = speed-up of gpufilt;"
          f" queued = {QUEUED_CALLS} gpufilt calls back to back, per call")
    _bench.print_table(header, rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--log2-size", type=int, default=28, help="elements = 2^this (default 28)")
    parser.add_argument("--only", default="", help="comma-separated keys of the operations to run (see --list)")
    parser.add_argument("--cases", default="", help="run only operations whose name contains this")
    parser.add_argument("--list", action="store_true", help="print the operations' keys and names, then exit")
    parser.add_argument("--json", help="write the results to this JSON file")
    args = parser.parse_args(argv)
    if args.list:
        for op in build_ops():
            print(f"{op.key:28} {op.name}")
        return
    only = {key.strip() for key in args.only.split(",") if key.strip()}
    unknown = only - {op.key for op in build_ops()}
    if unknown:
        parser.error(f"--only: unknown keys {sorted(unknown)} (see --list)")
    info = device_info()
    print("  ".join(f"{k}: {v}" for k, v in info.items()))
    bandwidth = copy_bandwidth()
    print(f"device-to-device copy: {bandwidth / 1e12:.3f} TB/s (read + write)")
    data = make_data(1 << args.log2_size)
    records = []
    for op in build_ops():
        if args.cases.lower() in op.name.lower() and (not only or op.key in only):
            print(f"... {op.name}", flush=True)
            records.append(run_op(op, data, bandwidth))
            free_device_memory()
    print_report(records)
    if args.json:
        _bench.write_json(args.json, {"info": info, "copy_bandwidth_Bps": bandwidth,
                                      "elements": 1 << args.log2_size, "results": records})


if __name__ == "__main__":
    main()
