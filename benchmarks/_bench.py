"""Helpers shared by bench_gpu.py and bench_cpu.py.

Everything here is backend-neutral: arrays are numpy or cupy, and the timers
are passed in as functions, so both scripts check, repeat, tabulate and save
results the same way.
"""
from __future__ import annotations

import json
import statistics
import time

FLOAT_TOLERANCE = 1e-4   # max |a - b| relative to the reference's data range
INTEGER_TOLERANCE = 1    # integer outputs may differ by one unit (rounding)


def compare(result, reference, int_tolerance=INTEGER_TOLERANCE, float_tolerance=FLOAT_TOLERANCE):
    """(ok, text): how far result is from reference, by the tolerances above."""
    if reference.dtype.kind == "c":  # real and imaginary parts side by side
        result, reference = (x.view(x.real.dtype) for x in (result, reference))
    a = result.astype("float64")
    b = reference.astype("float64")
    max_diff = float(abs(a - b).max())
    if reference.dtype.kind in "iub":
        return max_diff <= int_tolerance, f"max|d|={max_diff:g}"
    data_range = float(b.max() - b.min()) or 1.0
    rel = max_diff / data_range
    return rel <= float_tolerance, f"rel={rel:.1e}"


def check_text(result, reference, int_tolerance=INTEGER_TOLERANCE, float_tolerance=FLOAT_TOLERANCE):
    """'ok ...' or 'FAIL ...' for the table; never raises."""
    try:
        if result.shape != reference.shape or result.dtype != reference.dtype:
            return (f"FAIL shape/dtype {result.shape} {result.dtype} "
                    f"vs {reference.shape} {reference.dtype}")
        ok, detail = compare(result, reference, int_tolerance, float_tolerance)
    except Exception as err:  # noqa: BLE001 - a check must not stop the run
        return f"FAIL check raised {type(err).__name__}: {err}"
    return ("ok " if ok else "FAIL ") + detail


def repeat_count(seconds_per_call, budget_s, max_reps, min_reps=3):
    """How many repeats fit in budget_s, within [min_reps, max_reps]."""
    fit = int(budget_s / max(seconds_per_call, 1e-9))
    return max(min(max_reps, min_reps), min(fit, max_reps))


def median_ms(time_once_ms, budget_s=0.75, max_reps=200, min_reps=3, keep_first=False):
    """Median of repeated time_once_ms() calls, after one warm-up call.

    The warm-up call also sizes the repeat count so a case takes ~budget_s.
    keep_first counts the warm-up call as a sample too when it alone takes
    the whole budget (a slow library: with min_reps=0 a call slower than
    budget_s is run once). A faster warm-up call is never a sample: it
    may pay one-time costs (a fresh output's page faults took 150 ms where
    later calls took 19), and a second call sizes the repeats instead.
    """
    first = time_once_ms()
    if keep_first and first / 1e3 < budget_s:
        first = time_once_ms()  # a warm call sizes the repeats, and is the sample kept
    reps = repeat_count(first / 1e3, budget_s, max_reps, min_reps)
    samples = [time_once_ms() for _ in range(reps)]
    return statistics.median(samples + [first] if keep_first or not samples else samples)


def per_call_us(call, finish=lambda: None, budget_s=0.5, max_calls=20000, batches=5):
    """Wall time of one call(), in microseconds: the median over `batches`
    batches of many back-to-back calls of their mean, so that a batch the
    operating system interrupts does not move the result.

    finish() runs after each batch (e.g. a device synchronize), so queued
    asynchronous work is counted.
    """
    for _ in range(10):
        call()
    finish()
    start = time.perf_counter()
    for _ in range(50):
        call()
    finish()
    n = repeat_count((time.perf_counter() - start) / 50, budget_s, max_calls, min_reps=100 * batches)
    means = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(n // batches):
            call()
        finish()
        means.append((time.perf_counter() - start) / (n // batches) * 1e6)
    return statistics.median(means)


def attempt(func, *args):
    """(value, None) or (None, 'ErrorType: message'); a failing library is reported, not fatal."""
    try:
        return func(*args), None
    except Exception as err:  # noqa: BLE001 - report every library error in the table
        return None, f"{type(err).__name__}: {str(err).splitlines()[0][:80] if str(err) else ''}"


def fmt(value, digits=3):
    """A number for the table, or '-' when absent."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:.{digits}g}" if abs(value) < 10 ** digits else f"{value:.0f}"


def ratio(numerator, denominator):
    """numerator / denominator, or None if either is missing."""
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def print_table(header, rows):
    """Prints rows (lists of strings) under header, columns padded to fit."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda cells: "  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


def write_json(path, payload):
    """Writes payload to path (pretty-printed) and says so."""
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)
    print(f"wrote {path}")
