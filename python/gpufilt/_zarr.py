"""Filtering a zarr array into another, out of core (gpufilt.dask.filter_zarr).

Each task owns one unit of the target (a shard where the target is sharded,
else a chunk): it reads its unit plus the halo straight from the source
store, filters, and writes that unit whole. No task depends on another, a
worker holds about one block at a time whatever the volume's size, and no
write straddles a chunk or shard, so units written by an interrupted run
are whole and `resume=True` skips them.
"""
from __future__ import annotations

import importlib
import itertools
import math
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import _gpus
from . import dask as gdask


def _zarr():
    try:
        return importlib.import_module("zarr")
    except ImportError:
        raise ImportError('filter_zarr needs zarr 3: pip install "gpufilt[zarr]"') from None


@dataclass(frozen=True)
class _Unit:
    """One task: read `ranges` (per axis, the source's [lo, hi) in order),
    filter (on the CPU, or on GPU `gpu`), keep `own`, write the target's
    `region`."""
    source: Any
    target: Any
    steps: tuple
    ranges: tuple
    own: tuple
    region: tuple
    gpu: int | None = None

    def __call__(self):
        reads = self._read()
        block = gdask._cut_and_join(reads, tuple([(k, 0, hi - lo) for k, (lo, hi) in enumerate(axis)]
                                                 for axis in self.ranges))
        if self.gpu is None:
            self.target[self.region] = self._filter(block)
            return
        with _gpus.lease(self.gpu, streaming=True) as lane:
            block = _gpus.download(self._filter(_gpus.upload(block, lane)), lane)
        self.target[self.region] = block

    def _filter(self, block):
        for step in self.steps:
            block = step(block)
        return block[self.own]

    def _read(self, axis=0, index=()):
        """The source's pieces as a nested list, one level per axis."""
        if axis == len(self.ranges):
            return np.asarray(self.source[tuple(slice(*self.ranges[a][i]) for a, i in enumerate(index))])
        return [self._read(axis + 1, index + (i,)) for i in range(len(self.ranges[axis]))]


def _written_units(target):
    """The keys of the target's units (shards or chunks) already in its store."""
    from zarr.core.sync import sync

    async def listing():
        return [key async for key in target.store.list_prefix(target.store_path.path)]
    prefix = target.store_path.path
    return {key[len(prefix):].lstrip("/") if prefix else key for key in sync(listing())}


def _open_or_create(target, source, dtype, chunks, shards, resume):
    zarr = _zarr()
    if not isinstance(target, zarr.Array):
        if resume:
            try:
                target = zarr.open_array(target, mode="r+")
            except FileNotFoundError:
                pass
        if not isinstance(target, zarr.Array):
            return zarr.create_array(target, shape=source.shape, dtype=dtype, chunks=chunks or source.chunks,
                                     shards=shards if shards != "source" else source.shards,
                                     compressors=source.compressors, zarr_format=source.metadata.zarr_format,
                                     overwrite=True)
    if target.shape != source.shape or target.dtype != dtype:
        raise ValueError(f"target has shape {target.shape} and dtype {target.dtype}; the filters make "
                         f"{source.shape} {dtype}")
    return target


def filter_zarr(source: Any, target: Any, steps: Sequence[Any], *, chunks: Any = None, shards: Any = "source",
                resume: bool = False, device: str = "cpu", gpus: Any = None, task_bytes: int | None = None,
                compute: bool = True) -> Any:
    """Filter a zarr array into another, out of core: each task reads one
    unit of the target plus the halo straight from the source store,
    filters it, and writes that unit whole.

    Parameters
    ----------
    source : zarr.Array or str
        The input array (zarr format 2 or 3, sharded or not), or its path.
    target : zarr.Array or str
        Where the result goes: a path (a new array of the source's shape,
        compressors and zarr format, and the filters' dtype) or an array.
    steps : sequence
        The filters, as gpufilt.dask.chain takes them. They must share one
        halo exchange (no whole-array operation, no Fourier filter, and no
        axis both wrapped by one step and not by another).
    chunks : tuple of int, optional
        The target's chunks; default the source's.
    shards : tuple of int or None, optional
        The target's shards; default the source's (None: no shards).
    resume : bool, optional
        Skip the units (shards or chunks) already in the target's store: an
        interrupted run goes on where it stopped. Units that hold only the
        fill value are not stored by zarr, so they are computed again.
    device : {"cpu", "gpu"}, optional
        Where the filters run: numpy blocks on the CPU, or cupy blocks on
        GPUs (each block moves to its GPU through a pinned buffer and back:
        the data is on disk).
    gpus : "all", int or sequence of int, optional
        With device="gpu", the GPUs the tasks are spread over (contiguous
        runs of tasks on each); default the current GPU.
    task_bytes : int, optional
        About how much of the target one task writes (whole chunks or
        shards, at least one): default 64 MiB, so that the halo's decoding
        of neighbouring chunks is small beside the task's own; 0 gives one
        chunk or shard a task. A worker holds about three times this.
    compute : bool, optional
        Run now with dask's current scheduler (default), or return a
        dask.delayed.Delayed that runs it.

    Returns
    -------
    target : zarr.Array or dask.delayed.Delayed
        The target array, written; or the Delayed that writes it.

    Examples
    --------
    >>> import numpy as np, zarr, tempfile, os
    >>> from gpufilt import ndimage
    >>> from gpufilt.dask import filter_zarr
    >>> folder = tempfile.mkdtemp()
    >>> source = zarr.create_array(os.path.join(folder, "in.zarr"), shape=(64, 64), chunks=(16, 16),
    ...                            dtype="f4")
    >>> source[:] = np.random.default_rng(0).random((64, 64))
    >>> out = filter_zarr(source, os.path.join(folder, "out.zarr"), [("gaussian_filter", {"sigma": 2})])
    >>> bool(np.allclose(out[:], ndimage.gaussian_filter(source[:], 2), atol=1e-6))
    True
    """
    zarr = _zarr()
    dask = importlib.import_module("dask")
    if device not in ("cpu", "gpu"):
        raise ValueError(f"device must be 'cpu' or 'gpu', not {device!r}")
    if gpus is not None and device != "gpu":
        raise ValueError("gpus= is for device='gpu'")
    if device == "gpu":
        gpus = _gpus.devices(_gpus._cupy().cuda.Device().id if gpus is None else gpus)
    if not isinstance(source, zarr.Array):
        source = zarr.open_array(source, mode="r")
    made = gdask.steps_of(steps, source.ndim)
    runs = gdask._runs(made)
    if len(runs) > 1 or any(s.reach is None or s.fourier or s.aligned for s in made):
        raise ValueError("filter_zarr runs filters that share one halo exchange: no whole-array operation, "
                         "Fourier filter or mask, and no axis wrapped by one step and not by another (run "
                         "filter_zarr once per group)")
    library = importlib.import_module("cupy" if device == "gpu" else "numpy")
    dtype = np.dtype(gdask._meta(library, source.ndim, source.dtype, made)[-1].dtype)
    target = _open_or_create(target, source, dtype, chunks, shards, resume)
    units = _units(source, target, made, resume, gpus, TASK_BYTES if task_bytes is None else task_bytes)
    done = dask.delayed(_written, pure=False)(target, *[dask.delayed(u, pure=False)() for u in units])
    return done.compute() if compute else done


def _written(target, *units):
    return target


# A task's share of the target by default: whole chunks (or shards) grown
# to about this many bytes, so that the halo, which costs a decode of every
# neighbouring chunk it touches, is small beside it (one 32x128x128 chunk a
# task spent 4-6x a zarr copy's time, mostly decoding its neighbours).
TASK_BYTES = 64 * 2**20


def _task_shape(target, reach, task_bytes):
    """The target region one task writes: a whole number of chunks (or
    shards) on every axis, grown along the axes with the most halo first
    to about task_bytes, and small enough that every core gets two tasks
    where the volume allows."""
    unit = list(target.shards or target.chunks)
    shape = list(unit)
    itemsize = target.dtype.itemsize
    goal = min(task_bytes, math.prod(target.shape) * itemsize / (2 * (os.cpu_count() or 1)))
    while math.prod(shape) * itemsize < goal:
        growable = [ax for ax in range(len(shape)) if shape[ax] < target.shape[ax]]
        if not growable:
            break
        ax = max(growable, key=lambda a: (sum(reach[a]) / shape[a], -a))
        shape[ax] += unit[ax]
    return shape


def _units(source, target, steps, resume, gpus, task_bytes):
    """The target's units left to write, as tasks (spread over `gpus`, ids, where given)."""
    reach = [(sum(s.reach[ax][0] for s in steps), sum(s.reach[ax][1] for s in steps)) for ax in range(source.ndim)]
    task = _task_shape(target, reach, task_bytes)
    wrap = [any(s.wrap[ax] for s in steps) for ax in range(source.ndim)]
    written = _written_units(target) if resume else set()
    tasks = []
    grid = [range(math.ceil(n / t)) for n, t in zip(source.shape, task)]
    for coords in itertools.product(*grid):
        if resume and _all_written(target, coords, task, written):
            continue
        ranges, own, region = [], [], []
        for ax, c in enumerate(coords):
            first, stop = c * task[ax], min(source.shape[ax], (c + 1) * task[ax])
            axis_ranges, offset = gdask._ranges(source.shape[ax], first, stop, *reach[ax], wrap[ax])
            ranges.append(tuple(axis_ranges))
            own.append(slice(offset, offset + stop - first))
            region.append(slice(first, stop))
        tasks.append((source, target, tuple(steps), tuple(ranges), tuple(own), tuple(region)))
    on = _gpus.placement(len(tasks), gpus) if gpus and tasks else [None] * len(tasks)
    return [_Unit(*task, gpu) for task, gpu in zip(tasks, on)]


def _all_written(target, coords, task, written):
    """Whether every unit (shard or chunk) of a task's region is stored."""
    unit = target.shards or target.chunks
    per_task = [t // u for t, u in zip(task, unit)]
    units = itertools.product(*(range(c * k, min(c * k + k, math.ceil(n / u)))
                                for c, k, n, u in zip(coords, per_task, target.shape, unit)))
    return all(target.metadata.encode_chunk_key(u) in written for u in units)
