"""``gpufilt filter SRC DST OP [OP ...]``: filter a .npy, .tif/.tiff or zarr
file into another, block by block on Dask, on the CPU or a GPU.

The result is written next to DST as DST.partial and renamed to DST only
when complete, so an interrupted or failed run never leaves an output that
looks whole. zarr to zarr runs out of core (gpufilt.dask.filter_zarr) and
`--resume` continues an interrupted run from its DST.partial.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import os
import shutil
import sys
import time

import numpy as np

_FORMATS = (".npy", ".tif", ".tiff", ".zarr")
_NOT_OPTIONS = {"input", "output", "stream", "threads", "kwargs"}


class CliError(Exception):
    """A bad file, filter or parameter: printed as one line, exit status 2."""


def _filters_help():
    from . import ndimage
    lines = ["filters (OP is NAME:PARAM=VALUE,...; values are Python literals, bare words are strings):"]
    for name in ndimage.__all__:
        function = getattr(ndimage, name)
        try:
            parameters = inspect.signature(function).parameters
        except (TypeError, ValueError):
            continue
        if "input" not in parameters:
            continue
        shown = [p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
                 for p in parameters.values() if p.name not in _NOT_OPTIONS and p.kind is not p.VAR_KEYWORD]
        lines.append(f"  {name}: {', '.join(shown)}")
    lines.append("example: gpufilt filter in.zarr out.zarr gaussian_filter:sigma=2 median_filter:size=3")
    return "\n".join(lines)


def add_parser(commands):
    parser = commands.add_parser(
        "filter", help="filter a .npy, .tif/.tiff or zarr file into another (Dask, out of core for zarr)",
        description=__doc__, epilog=_filters_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", help="the input: a .npy, .tif/.tiff or .zarr path")
    parser.add_argument("dst", help="the output: a .npy, .tif/.tiff or .zarr path (not an existing one, "
                                    "unless --overwrite or --resume)")
    parser.add_argument("ops", nargs="+", metavar="OP", help="filters in order, e.g. gaussian_filter:sigma=2")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="where the filters run")
    parser.add_argument("--gpus", default=None,
                        help="with --device gpu: 'all', or GPU ids separated by commas (e.g. 0,1); blocks are "
                             "spread over them (default: the current GPU)")
    parser.add_argument("--chunks", default=None,
                        help="block edge, or one per axis (e.g. 256 or 64,512,512); default the source's "
                             "chunks for zarr, about 64 MiB blocks otherwise")
    parser.add_argument("--resume", action="store_true", help="zarr to zarr: continue an interrupted run")
    parser.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    parser.add_argument("--no-progress", action="store_true", help="no progress line")
    return parser


def parse_op(text):
    """'name:a=1,b=(2,3),mode=wrap' -> (name, {'a': 1, 'b': (2, 3), 'mode': 'wrap'})."""
    from . import ndimage
    name, _, params = text.partition(":")
    if name not in ndimage.__all__ or "input" not in inspect.signature(getattr(ndimage, name)).parameters:
        raise CliError(f"unknown filter {name!r} (gpufilt filter --help lists them)")
    try:
        call = ast.parse(f"f({params})", mode="eval").body
    except SyntaxError:
        raise CliError(f"{text!r}: parameters are NAME=VALUE separated by commas") from None
    if call.args:
        raise CliError(f"{text!r}: parameters are NAME=VALUE separated by commas")
    kwargs = {}
    accepted = inspect.signature(getattr(ndimage, name)).parameters
    for keyword in call.keywords:
        if keyword.arg is None or keyword.arg in _NOT_OPTIONS - {"output"} or (
                keyword.arg not in accepted and keyword.arg not in ("truncate", "radius")):
            raise CliError(f"{name} has no parameter {keyword.arg!r} (gpufilt filter --help lists them)")
        value = keyword.value
        kwargs[keyword.arg] = value.id if isinstance(value, ast.Name) else _literal(value, text)
    return name, kwargs


def _literal(node, text):
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise CliError(f"{text!r}: {ast.unparse(node)} is not a literal") from None


def _format(path, role):
    ext = os.path.splitext(path.rstrip("/"))[1].lower()
    if ext not in _FORMATS:
        raise CliError(f"{role} {path!r}: the formats are {', '.join(_FORMATS)}")
    return ext


def _chunks(text, ndim, shape, itemsize):
    if text is None:
        edge = max(1, int((64 * 2**20 / itemsize) ** (1 / max(ndim, 1))))
        return tuple(min(n, edge) for n in shape)
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise CliError(f"--chunks {text!r}: an int or one per axis, separated by commas") from None
    if len(values) == 1:
        values *= ndim
    if len(values) != ndim or min(values) < 1:
        raise CliError(f"--chunks {text!r}: one positive int, or {ndim} of them")
    return tuple(values)


def _gpus(text, device):
    """--gpus as gpufilt takes it: None (the current GPU), 'all' or ids."""
    if text is None:
        return None
    if device != "gpu":
        raise CliError("--gpus is for --device gpu")
    if text == "all":
        return "all"
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise CliError(f"--gpus {text!r}: 'all', or GPU ids separated by commas") from None


def _open_source(path, ext):
    """(array to read from, zarr.Array or None)."""
    if not os.path.exists(path):
        raise CliError(f"source {path!r} does not exist")
    try:
        if ext == ".npy":
            return np.load(path, mmap_mode="r"), None
        if ext == ".zarr":
            zarr = importlib.import_module("zarr")
            array = zarr.open_array(path, mode="r")
            return array, array
        tifffile = importlib.import_module("tifffile")
        try:
            return tifffile.memmap(path, mode="r"), None
        except ValueError:  # compressed or tiled: read it
            return tifffile.imread(path), None
    except ImportError as error:
        raise CliError(f"reading {ext} files needs {error.name}: pip install \"gpufilt[zarr]\"") from None
    except Exception as error:  # noqa: BLE001 - any reader's complaint about a bad file
        raise CliError(f"cannot read {path!r} as {ext}: {error}") from None


class _Progress:
    """A dask callback printing the share of blocks done and the throughput."""

    def __init__(self, total_bytes, stream=sys.stderr):
        from dask.callbacks import Callback
        self.total_bytes, self.stream = total_bytes, stream
        self.start = self.shown = time.perf_counter()
        progress = self

        class Reporter(Callback):
            def _start_state(self, dsk, state):
                progress.tasks = max(1, len(state["ready"]) + len(state["waiting"]))
                progress.finished = 0

            def _posttask(self, key, result, dsk, state, worker_id):
                progress.finished += 1
                progress.show()

        self.callback = Reporter()

    def show(self, final=False):
        now = time.perf_counter()
        if not final and now - self.shown < 0.25:  # a line four times a second at most
            return
        self.shown = now
        share = self.finished / self.tasks
        elapsed = max(now - self.start, 1e-9)
        rate = share * self.total_bytes / elapsed / 2**20
        end = "\n" if final else ""
        self.stream.write(f"\r{100 * share:5.1f}% of {self.tasks} tasks, {rate:8.1f} MiB/s, {elapsed:6.1f} s{end}")
        self.stream.flush()


def _write(ext, partial, result, shape, dtype):
    """Write the lazy result into `partial` in the destination's format."""
    da = importlib.import_module("dask.array")
    if ext == ".zarr":
        result.to_zarr(partial, overwrite=True)
        return
    if ext == ".npy":
        target = np.lib.format.open_memmap(partial, mode="w+", dtype=dtype, shape=shape)
    else:
        tifffile = importlib.import_module("tifffile")
        target = tifffile.memmap(partial, shape=shape, dtype=dtype)
    da.store(result, target, lock=False)
    target.flush()
    del target


def run(args):
    from . import dask as gdask
    da = importlib.import_module("dask.array")
    dask = importlib.import_module("dask")
    src_ext, dst_ext = _format(args.src, "source"), _format(args.dst, "destination")
    steps = [parse_op(op) for op in args.ops]
    if os.path.exists(args.dst) and not args.overwrite:
        raise CliError(f"destination {args.dst!r} exists (--overwrite replaces it)")
    if args.resume and not (src_ext == dst_ext == ".zarr"):
        raise CliError("--resume is for zarr to zarr")
    gpus = _gpus(args.gpus, args.device)
    source, source_zarr = _open_source(args.src, src_ext)
    chunks = _chunks(args.chunks, source.ndim, source.shape, source.dtype.itemsize) if (
        args.chunks or source_zarr is None) else None
    partial = args.dst.rstrip("/") + ".partial"
    if not args.resume:
        _remove(partial)
    progress = None if args.no_progress else _Progress(source.nbytes)
    callbacks = [progress.callback] if progress else []
    try:
        with dask.config.set(scheduler="threads"), _callbacks(callbacks):
            if source_zarr is not None and dst_ext == ".zarr":
                dtype = gdask.filter_zarr(source_zarr, partial, steps, chunks=chunks, resume=args.resume,
                                          device=args.device, gpus=gpus).dtype
            else:
                x = da.from_array(source, chunks=chunks or source_zarr.chunks)
                if args.device == "gpu" and gpus is None:  # the current GPU, any filter
                    x = x.map_blocks(importlib.import_module("cupy").asarray)
                try:
                    result = gdask.chain(x, steps, gpus=gpus)
                except ValueError as error:
                    if gpus is None:
                        raise
                    raise CliError(f"--gpus: {error}") from None
                if args.device == "gpu" and gpus is None:
                    result = result.map_blocks(lambda b: b.get(), meta=np.empty((0,) * x.ndim, result.dtype))
                dtype = result.dtype
                _write(dst_ext, partial, result, source.shape, dtype)
    except OSError as error:
        raise CliError(f"writing {partial!r} failed: {error} (the partial output is left there; "
                       "DST was not created)") from None
    if progress:
        progress.show(final=True)
    if args.overwrite:
        _remove(args.dst)
    os.replace(partial, args.dst)
    print(f"wrote {args.dst}: shape {source.shape}, {np.dtype(dtype)}")
    return 0


def _callbacks(callbacks):
    import contextlib
    stack = contextlib.ExitStack()
    for callback in callbacks:
        stack.enter_context(callback)
    return stack


def _remove(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def main(args):
    try:
        return run(args)
    except CliError as error:
        print(f"gpufilt filter: error: {error}", file=sys.stderr)
        return 2
    # The filters' own argument errors, and ImportError (--device gpu without CuPy).
    except (ValueError, TypeError, RuntimeError, MemoryError, ImportError) as error:
        print(f"gpufilt filter: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
