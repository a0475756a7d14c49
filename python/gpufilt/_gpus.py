"""Several GPUs in one process: which GPU each block of a dask array runs
on, and how blocks move between the host and the GPUs and from GPU to GPU.

One process drives every GPU of the machine from dask's thread pool (its
default scheduler for arrays), rather than one process a GPU (dask-cuda):

- a halo held by another GPU is copied GPU to GPU (cudaMemcpyAsync across
  devices: over NVLink or PCIe peer-to-peer where the GPUs can reach each
  other), where dask-cuda's workers send it through the host (TCP, or UCX
  where installed);
- nothing is serialised, and the engine is the one dask users already have.

A task leases one of its GPU's lanes (LANES_PER_GPU of them): a stream and
two pinned buffers of STAGE_BYTES. Lanes bound what a GPU holds in flight,
and let the next task queue its work while the GPU runs the last one's (see
lease for which lanes share a stream). Host data crosses through the lane's
two buffers in turns, a slab at a time: while the GPU copies one buffer, the
task's thread fills the other, so pinned memory stays a few hundred MiB
whatever the block size (pinning whole blocks cost more than the filter:
28 s for 34 GiB). A task ends by waiting for its lane's stream: its result,
which a task on another GPU or stream may read next, is then complete. That
wait blocks the task's own worker thread only, as a dask task's compute
does on the CPU.
"""
from __future__ import annotations

import contextlib
import importlib
import numbers
import queue
import threading
import weakref

import numpy as np

# Tasks in flight on one GPU: enough to queue the next task's work while
# the GPU runs one's, few enough that each GPU holds a handful of blocks.
LANES_PER_GPU = 4
# Tasks in flight on one GPU for host data streamed through it: their time
# goes to copies on the host, which more threads share out (8 lanes: 1.3 s
# for 16 GiB on 4 H200s, 4 lanes: 1.6 s).
STREAMING_LANES_PER_GPU = 8
# Each lane's two pinned buffers: large enough for full PCIe speed, small
# enough that pinning them is quick (4 GPUs: 3 GiB in all).
STAGE_BYTES = 32 * 2**20


def _cupy():
    try:
        return importlib.import_module("cupy")
    except ImportError:
        raise ImportError('gpus= needs CuPy: pip install "gpufilt[cuda]"') from None


def devices(gpus) -> tuple:
    """The GPU ids that `gpus` names: "all" (every visible GPU), an int, or
    a sequence of distinct ints."""
    if isinstance(gpus, str):
        if gpus != "all":
            raise ValueError(f"gpus must be 'all', a GPU id or a sequence of them, not {gpus!r}")
        count = _cupy().cuda.runtime.getDeviceCount()
        if count == 0:
            raise ValueError("gpus='all', but no GPU is visible")
        return tuple(range(count))
    ids = [gpus] if isinstance(gpus, numbers.Integral) else gpus
    try:
        ids = list(ids)
    except TypeError:
        raise TypeError(f"gpus must be 'all', a GPU id or a sequence of them, not {type(gpus).__name__}") from None
    if not ids or any(not isinstance(i, numbers.Integral) or isinstance(i, bool) for i in ids):
        raise ValueError(f"gpus must be 'all', a GPU id or a non-empty sequence of them, not {gpus!r}")
    ids = [int(i) for i in ids]
    if len(set(ids)) != len(ids):
        raise ValueError(f"gpus names a GPU twice: {gpus!r}")
    count = _cupy().cuda.runtime.getDeviceCount()
    bad = [i for i in ids if not 0 <= i < count]
    if bad:
        raise ValueError(f"gpus: no GPU {bad[0]} (GPUs 0 to {count - 1} are visible)")
    return tuple(ids)


def placement(count: int, gpus: tuple) -> list:
    """The GPU of each of `count` blocks in C order: contiguous runs of
    blocks, so that most halos are read from the same GPU."""
    return [gpus[k * len(gpus) // count] for k in range(count)]


class _Lane:
    """A stream of a GPU and two pinned buffers, lent to one task at a time."""

    def __init__(self, device, stream):
        self.stream = stream
        self.device = device
        self.keep = []  # what the stream's queued work reads, until it has run
        self._buffers = None
        self._copied = [None, None]  # each buffer's last copy (an event)

    def buffer(self, turn):
        """Pinned buffer `turn` (0 or 1), once the GPU has finished its
        last copy from or to it."""
        if self._buffers is None or self._buffers[0].nbytes < STAGE_BYTES:  # (STAGE_BYTES raised since)
            cupyx = importlib.import_module("cupyx")
            self._buffers = [cupyx.empty_pinned(STAGE_BYTES, np.uint8) for _ in range(2)]
        if self._copied[turn] is not None:
            self._copied[turn].synchronize()
        return self._buffers[turn]

    def copied(self, turn):
        """Mark buffer `turn` in use by the copy just queued on the stream."""
        event = _cupy().cuda.Event(block=True, disable_timing=True)  # a waiting thread sleeps, not spins
        event.record(self.stream)
        self._copied[turn] = event


class _Lanes:
    """Each GPU's lanes of one kind: `streaming` lanes have a stream each;
    the others share one stream (see lease)."""

    def __init__(self, streaming):
        self.streaming = streaming
        self._free = {}
        self._lock = threading.Lock()

    def pool(self, device):
        with self._lock:
            if device not in self._free:
                cupy = _cupy()
                lanes = STREAMING_LANES_PER_GPU if self.streaming else LANES_PER_GPU
                # Blocking streams (a stream belongs to the device current when it is made): ordered with
                # the legacy default stream both ways, where work outside gpufilt's tasks (map_blocks(
                # cupy.asarray), dask's own operations) runs, so a task never reads a chunk before that
                # work has written it, nor does that work read a result after its memory was reused.
                with cupy.cuda.Device(device):
                    streams = [cupy.cuda.Stream(non_blocking=False) for _ in range(lanes if self.streaming else 1)]
                free = queue.SimpleQueue()
                for k in range(lanes):
                    free.put(_Lane(device, streams[k % len(streams)]))
                self._free[device] = free
            return self._free[device]


_lanes = {True: _Lanes(streaming=True), False: _Lanes(streaming=False)}


@contextlib.contextmanager
def lease(device: int, streaming: bool = False):
    """Run a task on `device`: the device and one of its lanes' stream
    current; on leaving, the stream's work is complete (the task's result
    may be read on any GPU or stream).

    Tasks whose results stay on the GPU share one stream per GPU: CuPy's
    pool keeps freed blocks for the stream that allocated them, so results
    made on several streams and freed later were allocated afresh by the
    next run (cudaMalloc, dear with peer access on: two streams a GPU made
    a 16 GiB gaussian on 4 GPUs 2.3x slower than one). The next task still
    queues its work while the GPU runs the last one's. `streaming` tasks
    (host data through the GPU, whose device arrays live only during the
    task) have a stream each, so that one's copies overlap another's kernels."""
    cupy = _cupy()
    free = _lanes[streaming].pool(device)
    lane = free.get()
    try:
        with cupy.cuda.Device(device), lane.stream:
            yield lane
    finally:
        try:  # also after an error: queued copies may still read what lane.keep holds
            lane.stream.synchronize()
        finally:
            lane.keep.clear()
            free.put(lane)


def device_of(array):
    """The GPU id of a cupy array, None for a host array."""
    device = getattr(array, "device", None)
    return getattr(device, "id", None) if type(array).__module__.startswith("cupy") else None


def _slabs(shape, itemsize):
    """Index tuples that cut an array of `shape` into slabs of at most
    STAGE_BYTES, each contiguous in a C-order array: ranges along the first
    axis whose trailing elements fit, each index of the axes before it."""
    shape = tuple(int(n) for n in shape)
    if not shape:
        return [(...,)]  # a 0-d array's view (a[()] would be a scalar)
    axis = 0  # the first axis whose trailing block fits a buffer
    while axis < len(shape) - 1 and int(np.prod(shape[axis + 1:], dtype=np.int64)) * itemsize > STAGE_BYTES:
        axis += 1
    row = max(1, int(np.prod(shape[axis + 1:], dtype=np.int64)) * itemsize)
    step = max(1, STAGE_BYTES // row)
    ranges = [slice(lo, min(shape[axis], lo + step)) for lo in range(0, shape[axis], step)]
    return [(*outer, r) for outer in np.ndindex(*shape[:axis]) for r in ranges]


def _staged(buffer, part):
    """The part of a pinned buffer that holds an array like `part`."""
    return buffer[:part.nbytes].view(part.dtype).reshape(part.shape)


def upload(array, lane):
    """A host array (any strides) copied to the lane's GPU, a slab at a
    time through its two pinned buffers, asynchronously on its stream."""
    moved = _cupy().empty(array.shape, array.dtype)
    for turn, index in enumerate(_slabs(array.shape, array.itemsize)):
        part, target = array[index], moved[index]
        staged = _staged(lane.buffer(turn % 2), part)
        np.copyto(staged, part)
        target.set(staged, stream=lane.stream)
        lane.copied(turn % 2)
    return moved


def download(array, lane):
    """A cupy array on the lane's GPU copied into a new host array, a slab
    at a time through the lane's pinned buffers (each slab's copy out of
    the buffer overlaps the next slab's copy from the GPU)."""
    array = _cupy().ascontiguousarray(array).reshape(array.shape)  # (which makes a 0-d array 1-d)
    out = np.empty(array.shape, array.dtype)
    pending = []
    for turn, index in enumerate(_slabs(array.shape, array.itemsize)):
        part, target = array[index], out[index]
        if len(pending) == 2:
            _unstage(*pending.pop(0))
        staged = _staged(lane.buffer(turn % 2), target)
        part.get(stream=lane.stream, out=staged, blocking=False)
        lane.copied(turn % 2)
        pending.append((lane, turn % 2, staged, target))
    for item in pending:
        _unstage(*item)
    return out


def _unstage(lane, turn, staged, target):
    lane.buffer(turn)  # waits for the copy into it
    np.copyto(target, staged)


def finished(array, inputs=()):
    """`array`, made by a task that ran under lease (so complete), marked as
    such: a later copy of it or of a view of it to another GPU need not wait
    for the work of the GPU that holds it (to_device). An array that views
    one of the task's `inputs` (whose producers are not known) is not
    marked. Returns `array`."""
    root = _root(array)
    if any(_root(x) is root for x in inputs):
        return array
    key = id(root)

    def forget(ref, key=key):
        if _finished.get(key) is ref:
            del _finished[key]

    _finished[key] = weakref.ref(root, forget)
    return array


# id -> weak reference of the arrays `finished` marked (an id is reused only
# after its array died, and then the new array is not in here).
_finished = {}


def _root(array):
    """The array that owns the memory `array` views."""
    while array.base is not None:
        array = array.base
    return array


def _is_finished(array):
    """Whether `array` views an array `finished` marked."""
    root = _root(array)
    ref = _finished.get(id(root))
    return ref is not None and ref() is root


def _side_stream(device):
    """A blocking stream of `device` for gathering the halos other GPUs
    read: ordered after work on the legacy default stream, not after the
    lanes' queued tasks."""
    with _side_lock:
        if device not in _side_streams:
            cupy = _cupy()
            with cupy.cuda.Device(device):
                _side_streams[device] = cupy.cuda.Stream(non_blocking=False)
        return _side_streams[device]


_side_streams = {}
_side_lock = threading.Lock()


def wait_for_default_stream(lane):
    """Order the lane's stream after the work queued so far on its GPU's
    legacy default stream (where work outside gpufilt's tasks runs)."""
    cupy = _cupy()
    with cupy.cuda.Device(lane.device):
        ready = cupy.cuda.Event(block=True, disable_timing=True)
        ready.record(cupy.cuda.Stream.null)
    lane.stream.wait_event(ready)


def to_device(array, lane):
    """`array` (host, or a cupy array on any GPU) on the lane's GPU: host
    data through its pinned buffers, another GPU's data GPU to GPU. Sources
    stay in lane.keep until the stream has copied them.

    A copy from another GPU waits only for what may still be writing the
    array there: nothing for the results of gpufilt's tasks (finished); for
    other arrays, the work queued on that GPU's legacy default stream, where
    work outside gpufilt's tasks runs (map_blocks(cupy.asarray), dask's own
    operations), and which waits in turn for every blocking stream there,
    gpufilt's lanes included. Waiting for those always (one GPU's queued
    tasks holding up another's halos) cost the scaling of a 16 GiB median
    on 2 H200s: 1.71x -> 1.12x."""
    cupy = _cupy()
    source = device_of(array)
    if source == lane.device:
        return array
    if source is None:
        return upload(array, lane)
    known = _is_finished(array)
    if not known or not array.flags.c_contiguous:
        with cupy.cuda.Device(source):
            stream = _side_stream(source) if known else cupy.cuda.Stream.null
            with stream:  # made contiguous on its own GPU, then copied in one piece
                array = cupy.ascontiguousarray(array).reshape(array.shape)
            ready = cupy.cuda.Event(block=True, disable_timing=True)
            ready.record(stream)
        lane.stream.wait_event(ready)
    lane.keep.append(array)
    moved = cupy.empty(array.shape, array.dtype)
    moved.data.copy_from_device_async(array.data, array.nbytes, lane.stream)
    return moved
