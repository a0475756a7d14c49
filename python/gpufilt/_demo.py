"""``python -m gpufilt demo``: a short tour that checks and times gpufilt.

It builds a seeded synthetic volume (smooth blobs plus Gaussian noise,
float32), filters it with gpufilt.ndimage on the CPU (numpy) and, when a CUDA
device is usable and cupy is installed, on the GPU (cupy); checks every
result against scipy.ndimage (max abs error relative to the reference's
range < 1e-5) and prints PASS/FAIL; times gpufilt CPU, gpufilt GPU and scipy
(warm-up first, median of a few repeats) and prints a table of the speed-ups
over scipy; and writes a before/after PNG of the middle slice (matplotlib if
installed, else a small built-in grayscale PNG writer).

``run_demo`` returns 0 when every check passes, 1 otherwise.
"""
from __future__ import annotations

import os
import statistics
import struct
import time
import zlib

import numpy as np

import gpufilt
from gpufilt import ndimage as gnd

TOLERANCE = 1e-5  # max abs error / range of the scipy result (float32)

# (label, function name, keyword arguments); a filter gpufilt lacks is skipped.
FILTERS = [
    ("gaussian_filter sigma=2", "gaussian_filter", {"sigma": 2.0}),
    ("uniform_filter size=5", "uniform_filter", {"size": 5}),
    ("median_filter size=3", "median_filter", {"size": 3}),
]


# ------------------------------------------------------------------- data

def make_volume(size: int, seed: int = 0) -> np.ndarray:
    """A size^3 float32 volume: a few smooth Gaussian blobs plus noise."""
    rng = np.random.default_rng(seed)
    z, y, x = np.ogrid[:size, :size, :size]
    volume = np.zeros((size,) * 3, dtype=np.float32)
    for _ in range(6):
        cz, cy, cx = rng.uniform(0.2, 0.8, 3) * size
        width = rng.uniform(0.06, 0.15) * size
        r2 = (z - cz) ** 2 + (y - cy) ** 2 + (x - cx) ** 2
        blob = np.exp(-r2 / (2 * width ** 2)).astype(np.float32)
        volume += np.float32(rng.uniform(0.5, 1.0)) * blob
    volume += rng.normal(0.0, 0.2, volume.shape).astype(np.float32)
    return volume


# ---------------------------------------------------------------- backends

def _import_scipy():
    try:
        import scipy.ndimage
    except ImportError:
        print("scipy is not importable: results are NOT checked and scipy is not timed "
              "(pip install scipy)")
        return None
    return scipy.ndimage


def _usable_cupy():
    """cupy when gpufilt has a usable CUDA device and cupy imports, else None."""
    cuda = gpufilt.info()["cuda"]
    if not cuda["usable"]:
        print(f"GPU: not used ({cuda['unusable_reason']})")
        return None
    try:
        import cupy
    except Exception as exc:  # not installed, or installed for another CUDA
        print(f"GPU: not used (cupy is not importable: {exc}; pip install cupy-cuda13x)")
        return None
    print(f"GPU: {cuda['devices'][0]['name']} (cupy {cupy.__version__})")
    return cupy


def _repeats(first_run_s: float) -> int:
    """About one second of timing per measurement: 1 to 5 repeats."""
    return max(1, min(5, int(1.0 / max(first_run_s, 1e-9))))


def _time_cpu(fn):
    """(result of a warm-up call, median seconds of a few more calls)."""
    start = time.perf_counter()
    result = fn()
    times = []
    for _ in range(_repeats(time.perf_counter() - start)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return result, statistics.median(times)


def _time_gpu(cupy, fn):
    """Like _time_cpu, timed with CUDA events on cupy's current stream."""
    start = time.perf_counter()
    result = fn()
    cupy.cuda.get_current_stream().synchronize()
    begin, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(max(3, _repeats(time.perf_counter() - start))):
        begin.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(begin, end) / 1e3)
    return result, statistics.median(times)


# ------------------------------------------------------------------ checks

def _check(label: str, got, expected) -> bool:
    """Prints PASS/FAIL for `got` against scipy's `expected`."""
    if expected is None:
        print(f"  ----  {label}: not checked (no scipy)")
        return True
    scale = float(np.ptp(expected)) or 1.0
    error = float(np.max(np.abs(np.asarray(got, np.float64) - expected))) / scale
    ok = got.shape == expected.shape and error < TOLERANCE
    print(f"  {'PASS' if ok else 'FAIL'}  {label}: max error / range = {error:.1e}")
    return ok


def _attempt(label, timer):
    """Runs `timer()`; on an exception prints FAIL and returns (None, None)."""
    try:
        return timer()
    except Exception as exc:  # the demo reports every failure and goes on
        print(f"  FAIL  {label}: {type(exc).__name__}: {exc}")
        return None, None


def run_filter(label, name, kwargs, volume, scipy_nd, cupy):
    """Checks and times one filter everywhere; returns (ok, timings, CPU result)."""
    times = {}
    expected = None
    if scipy_nd is not None:
        expected, times["scipy"] = _time_cpu(lambda: getattr(scipy_nd, name)(volume, **kwargs))
    fn = getattr(gnd, name)
    cpu_result, times["cpu"] = _attempt(
        f"{label} CPU", lambda: _time_cpu(lambda: fn(volume, **kwargs)))
    ok = cpu_result is not None and _check(f"{label} CPU", cpu_result, expected)
    if cupy is not None:
        device_volume = cupy.asarray(volume)
        gpu_result, times["gpu"] = _attempt(
            f"{label} GPU", lambda: _time_gpu(cupy, lambda: fn(device_volume, **kwargs)))
        gpu_ok = gpu_result is not None and _check(
            f"{label} GPU", cupy.asnumpy(gpu_result), expected)
        ok = ok and gpu_ok
    return ok, times, cpu_result


# ------------------------------------------------------------------- table

def _cell(seconds, scipy_seconds, speedup=True):
    if seconds is None:
        return "-"
    text = f"{seconds * 1e3:.2f} ms"
    if speedup and scipy_seconds is not None:
        text += f" ({scipy_seconds / seconds:.1f}x)"
    return text


def print_table(rows, threads):
    header = ["filter", "scipy", f"gpufilt CPU ({threads} thr)", "gpufilt GPU"]
    lines = [[label, _cell(t.get("scipy"), None, False), _cell(t.get("cpu"), t.get("scipy")),
              _cell(t.get("gpu"), t.get("scipy"))] for label, t in rows]
    widths = [max(len(row[i]) for row in [header] + lines) for i in range(len(header))]
    print("\nTimings (median; speed-up over scipy in parentheses)")
    for row in [header, ["-" * w for w in widths]] + lines:
        print("  " + row[0].ljust(widths[0]) + "".join(
            "  " + cell.rjust(w) for cell, w in zip(row[1:], widths[1:])))


# --------------------------------------------------------------------- PNG

def write_gray_png(path: str, image: np.ndarray) -> None:
    """Writes a 2-D uint8 array as an 8-bit grayscale PNG (zlib + struct only)."""
    height, width = image.shape
    raw = b"".join(b"\x00" + image[row].tobytes() for row in range(height))

    def chunk(tag, data):
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def _side_by_side(before, after):
    """Both slices on one gray scale, 8 px apart, enlarged to >= 256 px tall."""
    low, high = float(before.min()), float(before.max())
    scaled = [np.clip((s - low) / ((high - low) or 1.0) * 255, 0, 255).astype(np.uint8)
              for s in (before, after)]
    gap = np.full((before.shape[0], 8), 255, np.uint8)
    image = np.hstack([scaled[0], gap, scaled[1]])
    zoom = max(1, -(-256 // before.shape[0]))
    return np.repeat(np.repeat(image, zoom, axis=0), zoom, axis=1)


def write_png(path, before, after, title) -> str:
    """Before/after PNG with matplotlib (Agg) if importable, else built-in."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        write_gray_png(path, _side_by_side(before, after))
        return "built-in PNG writer (matplotlib not installed)"
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.6))
    for ax, image, name in zip(axes, (before, after), ("noisy", title)):
        ax.imshow(image, cmap="gray", vmin=before.min(), vmax=before.max())
        ax.set_title(name)
        ax.axis("off")
    fig.suptitle("gpufilt demo: middle slice")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return "matplotlib"


# -------------------------------------------------------------------- main

def run_demo(size: int = 128, png_path: str = "gpufilt-demo.png") -> int:
    """Runs the demo; returns 0 when every check passes, 1 otherwise."""
    if size < 1:
        print(f"size must be at least 1, got {size}")
        return 1
    threads = gpufilt.info()["build"].get("cpu_threads", "?")
    print(f"gpufilt {gpufilt.__version__} demo: {size}^3 float32 volume (blobs + noise, seed 0)")
    volume = make_volume(size)
    scipy_nd = _import_scipy()
    cupy = _usable_cupy()
    print("\nChecks against scipy.ndimage (tolerance: max abs error / range < 1e-5)")
    rows, all_ok, smoothed = [], True, None
    for label, name, kwargs in FILTERS:
        if not hasattr(gnd, name):
            continue
        ok, times, result = run_filter(label, name, kwargs, volume, scipy_nd, cupy)
        all_ok &= ok
        rows.append((label, times))
        if name == "gaussian_filter":
            smoothed = result
    print_table(rows, threads)
    middle = size // 2
    after = smoothed[middle] if smoothed is not None else volume[middle]
    how = write_png(png_path, volume[middle], after, FILTERS[0][0])
    print(f"\nWrote {os.path.abspath(png_path)} (middle slice, noisy vs gaussian-filtered; {how})")
    print("\nAll checks passed." if all_ok else "\nSome checks FAILED.")
    return 0 if all_ok else 1
