"""Filtering a zarr array into another, out of core (gpufilt.dask.filter_zarr).

Each task owns whole units of the target (shards where the target is
sharded, else chunks): it reads its region plus the halo from the source,
filters, and writes those units whole. No task depends on another, a worker
holds about one block at a time whatever the volume's size, and no write
straddles a chunk or shard, so units written by an interrupted run are whole
and `resume=True` skips them. The source is read chunk by chunk through a
cache that the tasks share (_ChunkCache), so that a chunk which several
tasks' halos touch is decoded once.
"""
from __future__ import annotations

import collections
import concurrent.futures
import importlib
import itertools
import math
import numbers
import os
import threading
import uuid
import weakref
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
    """One task: read the source's `pieces` (per axis, (chunk, start in
    chunk, stop in chunk) in order) through `chunks`, filter (on the CPU, or
    on GPU `gpu`; each step's result cut by `crops`, see
    gpufilt.dask._crops), keep `own`, write the target's `region`."""
    chunks: _ChunkCache
    target: Any
    steps: tuple
    pieces: tuple
    own: tuple
    region: tuple
    crops: tuple = ()
    gpu: int | None = None

    def __call__(self):
        block = gdask._cut_and_join(self._read(), self.pieces)
        if self.gpu is None:
            result = self._filter(block)
        else:
            with _gpus.lease(self.gpu, streaming=True) as lane:
                result = _gpus.download(self._filter(_gpus.upload(block, lane)), lane)
        del block  # freed before the write: a worker holds a block and its result only while it filters
        self.target[self.region] = result

    def _filter(self, block):
        return gdask._run_steps(self.steps, self.crops, block)[self.own]

    def _read(self):
        """The source's chunks the pieces lie in, as a nested list, one level
        per axis; each taken once (a wrapped axis may list a chunk twice)."""
        indices = itertools.product(*(sorted({chunk for chunk, _, _ in axis}) for axis in self.pieces))
        taken = {index: self.chunks.take(index, wait=False) for index in indices}
        for index in [index for index, chunk in taken.items() if chunk is None]:
            taken[index] = self.chunks.take(index)  # those another task was decoding: done meanwhile, or soon
        return _nested(self.pieces, taken)


def _nested(pieces, taken, index=()):
    if len(index) == len(pieces):
        return taken[index]
    return [_nested(pieces, taken, index + (chunk,)) for chunk, _, _ in pieces[len(index)]]


class _ChunkCache:
    """The source's chunks, each decoded once and shared by the tasks of one
    filter_zarr call (dask's threads, in one process). zarr decodes whole
    chunks (the inner chunks of a sharded array), and a task's halo needs a
    thin slab of its neighbours' chunks: without this, each neighbour
    decoded them again.

    A chunk is dropped when its last reader has taken it (`readers`: per
    axis, how many task positions read each chunk index, counted up front;
    a chunk's readers are their product), and, least recently used first,
    when more than `max_bytes` are kept for readers to come (a later reader
    then decodes it again). A reader of a chunk being decoded waits for it
    rather than decode it twice. Pickled to another process (a
    dask.distributed worker), the tasks of the call there share one cache
    of their own, which starts empty (_process_cache)."""

    def __init__(self, source, readers, max_bytes, key=None):
        self.key = key or uuid.uuid4().hex  # the filter_zarr call's, across processes
        self.source = source
        self._readers = readers
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._kept = collections.OrderedDict()  # chunk index -> array, least recently used first
        self._kept_bytes = 0
        self._left = {}  # chunk index -> readers yet to take it, for the chunks taken so far
        self._decoding = {}  # chunk index -> Future of the decode in progress

    def __reduce__(self):
        return _process_cache, (self.key, self.source, self._readers, self._max_bytes)

    def take(self, index, wait=True):
        """Source chunk `index` (a tuple of chunk numbers), decoded; None
        where another task is decoding it and not `wait`. Each task takes
        each chunk it reads once: that counts its readers down."""
        with self._lock:
            decoding = self._decoding.get(index)
            if decoding is not None and not wait:
                return None
            last = self._count_down(index)
            if index in self._kept:
                return self._hand_out(index, last)
            if decoding is None:
                mine = self._decoding[index] = concurrent.futures.Future()
        if decoding is not None:
            return decoding.result()
        return self._decode(index, mine)

    def _count_down(self, index):
        """Count a reader of `index` off; whether it was the last."""
        left = self._left.pop(index, None)
        if left is None:
            left = math.prod(counts[i] for counts, i in zip(self._readers, index))
        if left > 1:
            self._left[index] = left - 1
        return left <= 1

    def _hand_out(self, index, last):
        if not last:
            self._kept.move_to_end(index)
            return self._kept[index]
        chunk = self._kept.pop(index)
        self._kept_bytes -= chunk.nbytes
        return chunk

    def _decode(self, index, future):
        region = tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, self.source.chunks))
        try:
            chunk = np.asarray(self.source[region])  # a region of exactly one chunk: zarr decodes that one
        except BaseException as error:
            with self._lock:
                del self._decoding[index]
            future.set_exception(error)
            raise
        with self._lock:
            del self._decoding[index]
            if index in self._left:  # readers to come
                self._keep(index, chunk)
        future.set_result(chunk)
        return chunk

    def _keep(self, index, chunk):
        self._kept[index] = chunk
        self._kept_bytes += chunk.nbytes
        while self._kept_bytes > self._max_bytes:
            _, dropped = self._kept.popitem(last=False)
            self._kept_bytes -= dropped.nbytes

    def kept(self):
        """The chunk indices kept now, least recently used first (for tests)."""
        with self._lock:
            return list(self._kept)


# The caches unpickled in this process, by call: a worker deserialises each
# task on its own, and its tasks of one call then share one cache for as
# long as any of them holds it.
_PROCESS_CACHES = weakref.WeakValueDictionary()
_PROCESS_CACHES_LOCK = threading.Lock()


def _process_cache(key, source, readers, max_bytes):
    """This process's cache of call `key` (made empty if none is held)."""
    with _PROCESS_CACHES_LOCK:
        cache = _PROCESS_CACHES.get(key)
        if cache is None:
            cache = _PROCESS_CACHES[key] = _ChunkCache(source, readers, max_bytes, key)
        return cache


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
        shards, at least one): default 16 MiB; 0 gives one chunk or shard a
        task. A worker holds about three times this, and the tasks share a
        cache of decoded source chunks of at most two tasks' reads per core.
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
    if task_bytes is not None and (not isinstance(task_bytes, numbers.Integral) or isinstance(task_bytes, bool)
                                   or task_bytes < 0):
        raise ValueError(f"task_bytes must be a non-negative int (0: one chunk or shard a task), not {task_bytes!r}")
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
    # Named in the source's order: dask runs independent tasks in the order
    # of their names, so neighbours, which share halo chunks, run together
    # (random names would scatter them and defeat the chunk cache).
    name, width = f"filter_zarr-{uuid.uuid4().hex}", len(str(len(units)))
    tasks = [dask.delayed(u, pure=False)(dask_key_name=f"{name}-{i:0{width}d}") for i, u in enumerate(units)]
    done = dask.delayed(_written, pure=False)(target, *tasks)
    return done.compute() if compute else done


def _written(target, *units):
    return target


# A task's share of the target by default: whole chunks (or shards) grown
# to about this many bytes. The chunk cache decodes each source chunk once
# however the tasks cut the volume, so they need not be large to make the
# halo's decoding small beside their own (without it, one 32x128x128 chunk
# a task spent 4-6x a zarr copy's time); smaller tasks hold less memory.
TASK_BYTES = 16 * 2**20


def _cache_bytes(task, reach, source):
    """At most this many bytes of decoded source chunks are kept for tasks
    to come: about two tasks' reads per core (the tasks in flight, and the
    halo chunks that the next ones take), whatever the volume's size.

    A task reads whole chunks: along each axis, those that its region grown
    by the reach can touch wherever it starts (1 + ceil((span - 1) / chunk)
    of them), at most the axis's. Counting its region alone missed the halo
    chunks: a thin task's read did not fit, and chunks were decoded again."""
    read = [min(math.ceil(n / c), 1 + math.ceil((t + lo + hi - 1) / c)) * c
            for n, c, t, (lo, hi) in zip(source.shape, source.chunks, task, reach)]
    return 2 * (os.cpu_count() or 1) * math.prod(read) * source.dtype.itemsize


def _task_shape(target, reach, task_bytes):
    """The target region one task writes: a whole number of chunks (or
    shards) on every axis, grown to about task_bytes, and small enough that
    every core gets two tasks where the volume allows.

    Grown along the last axes first: where a whole cross-section fits, the
    tasks are slabs along the first axis, with no halo across the others,
    and the tasks next to one in dask's order are the neighbours that share
    its halo chunks, so the chunk cache keeps them only briefly. Where it
    does not fit, grown along the axes with the most halo first instead, so
    that the halo is a small share of the task."""
    unit = list(target.shards or target.chunks)
    itemsize = target.dtype.itemsize
    goal = min(task_bytes, math.prod(target.shape) * itemsize / (2 * (os.cpu_count() or 1)))
    slab = _grown(unit, target.shape, itemsize, goal, lambda shape, growable: growable[-1])
    if all(t >= n for t, n in zip(slab[1:], target.shape[1:])):
        return slab
    return _grown(unit, target.shape, itemsize, goal,
                  lambda shape, growable: max(growable, key=lambda a: (sum(reach[a]) / shape[a], -a)))


def _grown(unit, extent, itemsize, goal, pick):
    """`unit` grown a unit at a time along the axis `pick(shape, growable)`
    chooses, until it holds `goal` bytes or covers `extent`."""
    shape = list(unit)
    while math.prod(shape) * itemsize < goal:
        growable = [ax for ax in range(len(shape)) if shape[ax] < extent[ax]]
        if not growable:
            break
        ax = pick(shape, growable)
        shape[ax] += unit[ax]
    return shape


def _units(source, target, steps, resume, gpus, task_bytes):
    """The target's units left to write, as tasks (spread over `gpus`, ids, where given)."""
    reach = [(sum(s.reach[ax][0] for s in steps), sum(s.reach[ax][1] for s in steps)) for ax in range(source.ndim)]
    task = _task_shape(target, reach, task_bytes)
    wrap = [any(s.wrap[ax] for s in steps) for ax in range(source.ndim)]
    # Per axis, per task position: the pieces of the source's chunks it reads, what it keeps, what it writes.
    axes = [_axis_tasks(source.shape[ax], source.chunks[ax], task[ax], reach[ax], wrap[ax])
            for ax in range(source.ndim)]
    chunks = _ChunkCache(source, [_readers(positions) for positions in axes], _cache_bytes(task, reach, source))
    written = _written_units(target) if resume else set()
    tasks = []
    for coords in itertools.product(*(range(len(positions)) for positions in axes)):
        if resume and _all_written(target, coords, task, written):
            continue
        pieces, kept, region = zip(*(positions[c] for positions, c in zip(axes, coords)))
        # Where the task's gathered range and its own elements lie in the source, per axis.
        spans = [(r.start - k.start, r.start - k.start + sum(hi - lo for _, lo, hi in p))
                 for p, k, r in zip(pieces, kept, region)]
        crops, own = gdask._crops(steps, spans, [(r.start, r.stop) for r in region], source.shape, wrap, 1)
        tasks.append((chunks, target, tuple(steps), pieces, own, region, crops))
    on = _gpus.placement(len(tasks), gpus) if gpus and tasks else [None] * len(tasks)
    return [_Unit(*task, gpu) for task, gpu in zip(tasks, on)]


def _axis_tasks(n, chunk, task, reach, wrap):
    """Along one axis, per task position: the pieces of the source's chunks
    it reads (gpufilt.dask._pieces), the part of them it keeps, and the
    target's part it writes."""
    starts = list(range(0, n, chunk)) + [n]
    positions = []
    for first in range(0, n, task):
        stop = min(n, first + task)
        pieces, offset = gdask._pieces(starts, first, stop, *reach, wrap)
        positions.append((tuple(pieces), slice(offset, offset + stop - first), slice(first, stop)))
    return positions


def _readers(positions):
    """How many task positions along an axis read each chunk index of it."""
    readers = collections.Counter()
    for pieces, _, _ in positions:
        readers.update({chunk for chunk, _, _ in pieces})
    return [readers[i] for i in range(max(readers, default=-1) + 1)]


def _all_written(target, coords, task, written):
    """Whether every unit (shard or chunk) of a task's region is stored."""
    unit = target.shards or target.chunks
    per_task = [t // u for t, u in zip(task, unit)]
    units = itertools.product(*(range(c * k, min(c * k + k, math.ceil(n / u)))
                                for c, k, n, u in zip(coords, per_task, target.shape, unit)))
    return all(target.metadata.encode_chunk_key(u) in written for u in units)
