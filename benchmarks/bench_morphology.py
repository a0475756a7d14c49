"""gpufilt's morphology and Fourier filters against cupyx.scipy.ndimage on
the GPU, in one process on the same arrays: medians of CUDA-event-timed
calls, each result checked against cupyx's. Also the maximum_filter of the
same window, which flat grey morphology costs by construction, and binary
erosion and dilation over structure sizes and iteration counts.

    python benchmarks/bench_morphology.py [--json FILE] [--quick]
"""
from __future__ import annotations

import argparse

import cupy as cp
import cupyx.scipy.ndimage as cnd
import numpy as np
from _bench import attempt, check_text, fmt, median_ms, print_table, ratio, write_json

from gpufilt import ndimage as gnd


def gpu_ms(call):
    start, stop = cp.cuda.Event(), cp.cuda.Event()

    def once():
        start.record()
        call()
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop)
    return median_ms(once)


def binary_sweep(plane, blobs2, blobs3, edge):
    """Binary erosion and dilation over structure sizes (3 to 31 in 2-D, 3
    to 9 in 3-D, full boxes) and iteration counts, on smooth blobs (large
    regions, where an erosion reads every tap of an inner element) and on
    noise (where a step decides within a tap or two)."""
    out = []
    for size in (3, 7, 15, 31):
        square = cp.ones((size, size), bool)
        for name in ("binary_erosion", "binary_dilation"):
            out.append((f"{name} square {size}, blobs 8192^2",
                        lambda m, n=name, e=square: getattr(m, n)(blobs2, e)))
    for size in (3, 5, 9):
        cube = cp.ones((size,) * 3, bool)
        out.append((f"binary_erosion cube {size}, blobs {edge}^3", lambda m, e=cube: m.binary_erosion(blobs3, e)))
    noise = plane > 0.45
    for iterations in (1, 10, 50):
        for name, image in (("noise", noise), ("blobs", blobs2)):
            # (cupyx repeats only with brute_force=True; gpufilt takes and ignores it, as scipy)
            out.append((f"binary_erosion cross, {iterations} iterations, {name} 8192^2",
                        lambda m, a=image, k=iterations: m.binary_erosion(a, iterations=k, brute_force=True)))
    return out


def cases(quick):
    rng = np.random.default_rng(0)
    edge = 256 if quick else 512
    volume = cp.asarray(rng.random((edge,) * 3, dtype=np.float32))
    plane = cp.asarray(rng.random((8192, 8192), dtype=np.float32))
    mask2 = plane > 0.45
    mask3 = volume > 0.5
    structure = cp.asarray(rng.integers(-2, 3, (3, 3)).astype(np.float64))
    structure7 = cp.asarray(rng.integers(-2, 3, (7, 7)).astype(np.float64))
    structure27 = cp.asarray(rng.random((3, 3, 3)))
    spectrum = cp.fft.fftn(volume[:256, :256, :256])
    spectrum_volume = cp.fft.fftn(volume)
    half_plane = cp.fft.rfft2(plane)  # 8192 x 4097, the real transform along the last axis
    blobs2 = cnd.uniform_filter(plane, 9) > 0.5
    blobs3 = cnd.uniform_filter(volume, 5) > 0.5
    marker = cp.zeros(blobs2.shape, bool)
    marker[::512, ::512] = True
    box = {"size": 3}
    return [
        (f"maximum_filter 3^3, {edge}^3", lambda m: m.maximum_filter(volume, **box)),
        (f"grey_dilation 3^3, {edge}^3", lambda m: m.grey_dilation(volume, **box)),
        (f"grey_opening 3^3, {edge}^3", lambda m: m.grey_opening(volume, **box)),
        (f"white_tophat 3^3, {edge}^3", lambda m: m.white_tophat(volume, **box)),
        (f"morphological_gradient 5^3, {edge}^3", lambda m: m.morphological_gradient(volume, size=5)),
        # (cupyx needs the footprint beside the structure)
        ("grey_erosion non-flat 3x3, 8192^2",
         lambda m: m.grey_erosion(plane, footprint=cp.ones((3, 3), bool), structure=structure)),
        ("grey_erosion non-flat 7x7, 8192^2",
         lambda m: m.grey_erosion(plane, footprint=cp.ones((7, 7), bool), structure=structure7)),
        (f"grey_dilation non-flat 3x3x3, {edge}^3",
         lambda m: m.grey_dilation(volume, footprint=cp.ones((3, 3, 3), bool), structure=structure27)),
        ("binary_erosion cross, 8192^2", lambda m: m.binary_erosion(mask2)),
        ("binary_dilation 10 iterations, 8192^2",
         lambda m: m.binary_dilation(mask2, iterations=10, brute_force=True)),
        (f"binary_opening 3^3 cross, {edge}^3", lambda m: m.binary_opening(mask3)),
        ("binary_fill_holes, 2048^2", lambda m: m.binary_fill_holes(mask2[:2048, :2048])),
        ("binary_fill_holes, blobs 8192^2", lambda m: m.binary_fill_holes(blobs2)),
        (f"binary_fill_holes, blobs {edge}^3", lambda m: m.binary_fill_holes(blobs3)),
        ("binary_propagation, blobs 8192^2", lambda m: m.binary_propagation(marker, mask=blobs2)),
        *binary_sweep(plane, blobs2, blobs3, edge),
        ("fourier_gaussian, 256^3 complex64", lambda m: m.fourier_gaussian(spectrum, 2.0)),
        ("fourier_shift, 256^3 complex64", lambda m: m.fourier_shift(spectrum, 1.5)),
        ("fourier_ellipsoid, 256^3 complex64", lambda m: m.fourier_ellipsoid(spectrum, 3.0)),
        ("fourier_uniform, 256^3 complex64", lambda m: m.fourier_uniform(spectrum, 5.0)),
        (f"fourier_gaussian, {edge}^3 complex64", lambda m: m.fourier_gaussian(spectrum_volume, 2.0)),
        ("fourier_gaussian, rfft2 of 8192^2 (n=8192)", lambda m: m.fourier_gaussian(half_plane, 2.0, n=8192)),
        ("fourier_ellipsoid, rfft2 of 8192^2 (n=8192)", lambda m: m.fourier_ellipsoid(half_plane, 9.0, n=8192)),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json")
    parser.add_argument("--quick", action="store_true", help="256^3 volumes")
    parser.add_argument("--cases", default="", help="comma-separated name prefixes of the cases to run")
    args = parser.parse_args()
    prefixes = tuple(p for p in args.cases.split(",") if p)
    rows, records = [], []
    for name, run in cases(args.quick):
        if prefixes and not name.startswith(prefixes):
            continue
        ours, _ = attempt(run, gnd)
        theirs, error = attempt(run, cnd)
        if error is not None:
            check = f"cupyx: {error}"
        else:
            check = check_text(ours.astype(cp.float32 if ours.dtype == bool else ours.dtype).get(),
                               theirs.astype(cp.float32 if theirs.dtype == bool else theirs.dtype).get())
        t_ours = gpu_ms(lambda: run(gnd))
        t_theirs = gpu_ms(lambda: run(cnd)) if error is None else None
        rows.append([name, fmt(t_ours), fmt(t_theirs), fmt(ratio(t_theirs, t_ours)), check])
        records.append({"case": name, "gpufilt_ms": t_ours, "cupyx_ms": t_theirs, "check": check})
        print(" | ".join(rows[-1]), flush=True)
    print()
    print_table(["case", "gpufilt ms", "cupyx ms", "x cupyx", "check"], rows)
    binary = [r for r in records if r["case"].startswith("binary") and r["cupyx_ms"]]
    if binary:
        worst = min(binary, key=lambda r: r["cupyx_ms"] / r["gpufilt_ms"])
        print(f"\nworst binary case: {worst['case']}, {worst['cupyx_ms'] / worst['gpufilt_ms']:.2f}x cupyx")
    print(f"\n{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, cupy {cp.__version__}")
    if args.json:
        write_json(args.json, {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "cases": records})


if __name__ == "__main__":
    main()
