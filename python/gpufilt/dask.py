"""gpufilt on Dask arrays: filters of volumes larger than memory, or than
one GPU, run block by block on the engine their users already have.

Every gpufilt.ndimage function takes a ``dask.array.Array`` and returns one,
lazily, with the input's chunks; numpy chunks run on the CPU kernels, cupy
chunks on the GPU of the worker that holds them. :func:`chain` runs several
filters with one exchange of halos, and :func:`filter_zarr` filters a zarr
array into another out of core.

How a block is computed: each output block is one task. It gathers its own
elements plus the filter's reach on each side (the halo) from whichever
input chunks hold them (neighbours' neighbours too, when chunks are smaller
than the halo: nothing is rechunked), runs the in-memory filter on that, and
keeps its own elements. Along an axis filtered with a ``wrap`` mode the halo
is taken across the array's ends, as the mode reads them; along any other
axis it stops at the array's ends, where the filter's own mode extends the
data exactly as it does in memory. So the results are the in-memory results.

Dask is an optional dependency (``pip install "gpufilt[dask]"``).
"""
from __future__ import annotations

import bisect
import importlib
import inspect
import itertools
import math
import numbers
import operator
import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from . import _args, _dispatch, _gpus

__all__ = ["WholeArrayWarning", "chain", "depth_of", "filter_zarr", "is_dask_array", "to_gpus"]


class WholeArrayWarning(UserWarning):
    """A filter whose result at one element may depend on every other
    (binary_propagation, binary_fill_holes, iterations < 1) gathers the whole
    array into one block."""


def is_dask_array(obj) -> bool:
    """Whether `obj` is a dask.array.Array (without importing dask).

    Examples
    --------
    >>> import numpy as np
    >>> from gpufilt.dask import is_dask_array
    >>> is_dask_array(np.zeros(3))
    False
    """
    return type(obj).__module__.startswith("dask.array") and hasattr(obj, "__dask_graph__")


def _dask_array():
    try:
        return importlib.import_module("dask.array")
    except ImportError:
        raise ImportError('gpufilt on dask arrays needs dask: pip install "gpufilt[dask]"') from None


# ----------------------------------------------------------------- reach

def _window(size, origin, flipped=False):
    """(before, after): how far a window of `size` taps with scipy's
    `origin` reads on each side of its output. A flipped window
    (convolutions, dilations) moves its origin as scipy moves it."""
    size, origin = int(size), int(origin)
    if size < 1:
        return 0, 0
    if flipped:
        origin = -origin - (1 - size % 2)
    before = size // 2 + origin
    return max(0, before), max(0, size - 1 - before)


def _spread(ndim, axes, values, default=(0, 0)):
    """Per-axis values given for `axes`, `default` on the others."""
    full = [default] * ndim
    for ax, value in zip(axes, values):
        full[ax] = value
    return full


def _radius(sigma, truncate, radius):
    """scipy's Gaussian radius: `radius` if given, else int(truncate * sigma + 0.5)."""
    if radius is not None:
        return int(radius)
    return int(float(truncate) * float(sigma) + 0.5)


def _window_shape(ndim, axes, size, footprint, structure=None, default=None):
    """Each filtered axis's window length, from a footprint, a structure or `size`."""
    for array in (footprint, structure):
        if array is not None:
            shape = np.shape(array)
            return list(shape) if len(shape) == len(axes) else [shape[ax] for ax in axes]
    if size is None:
        size = default
    return [int(_args._scalar(s)) for s in _args.normalize_sequence(size, len(axes), "size")]


def _windows(ndim, a, flipped=False, repeat=1, symmetric=False, default_size=None):
    """The reach of a footprint, structure or size window with its origins."""
    axes = _args.check_axes(a.get("axes"), ndim)
    shape = _window_shape(ndim, axes, a.get("size"), a.get("footprint"), a.get("structure"), default_size)
    origins = _args.normalize_sequence(a.get("origin", 0), len(axes), "origin")
    pairs = list(zip(shape, origins))
    if list(axes) != sorted(axes):
        # Listed out of order, scipy places a window's lengths and origins on
        # the axes by rules that differ between a size, a full footprint and
        # any other (ndimage's _expand_to_input, _expand_origins), and a
        # flipped window's origin moves by the length of another axis: every
        # axis here gets the widest reach of any length with any origin,
        # moved or not.
        moved = [m for o in origins for m in (int(_args._scalar(o)), -int(_args._scalar(o)),
                                              -int(_args._scalar(o)) - 1)]
        widest = [max(sides) for sides in zip(*(_window(s, o) for s in shape for o in moved))]
        pairs = [None] * len(axes)
    reach = []
    for pair in pairs:
        before, after = widest if pair is None else _window(pair[0], _args._scalar(pair[1]), flipped)
        if symmetric:  # composite operations (an erosion, then a flipped dilation): the wider side, twice
            before = after = max(before, after)
        reach.append((before * repeat, after * repeat))
    return _spread(ndim, axes, reach)


def _one_axis(ndim, axis, reach):
    return _spread(ndim, [_args.check_axis(axis, ndim)], [reach])


def _gaussians(ndim, a, derivatives=False):
    """gaussian_filter's reach, or the derivative filters' (a Gaussian of
    `sigma` along every axis, 0 where sigma is 0)."""
    kwargs = a.get("kwargs") or {}
    truncate = a.get("truncate", kwargs.get("truncate", 4.0))
    radius = a.get("radius", kwargs.get("radius"))
    axes = _args.check_axes(a.get("axes"), ndim)
    listed = axes
    sigma = a["sigma"]
    if derivatives or (np.iterable(sigma) and len(sigma) == ndim):
        axes = tuple(range(ndim))  # the derivatives smooth along every axis: sigma for each, or one for all
    sigmas = _args.normalize_sequence(sigma, len(axes), "sigma")
    radii = _args.normalize_sequence(radius, len(axes), "radius")
    reach = [(r, r) for r in (_radius(_args._scalar(s), truncate, _args._scalar(rad))
                              for s, rad in zip(sigmas, radii))]
    if list(listed) != sorted(listed):
        # Axes listed out of order: scipy pairs sigmas with them in the listed order or in the axes' own
        # (gaussian_filter, or the derivatives when every axis is listed): every axis gets the widest reach.
        reach = [max(reach)] * len(reach)
    return _spread(ndim, axes, reach)


def _binary(ndim, a, repeat=1):
    iterations = int(a.get("iterations", 1))
    if iterations < 1:
        return None  # until nothing changes: any element may depend on any other
    structure = a.get("structure")
    if structure is None:
        axes = _args.check_axes(a.get("axes"), ndim)
        a = dict(a, structure=np.ones((3,) * len(axes), bool))
    return _windows(ndim, a, repeat=iterations * repeat, symmetric=True)


def _vectorized(ndim, a):
    """vectorized_filter's reach: its window's, origin None being 0; mode
    'valid' shrinks the result, which blocks cannot."""
    if a.get("mode") == "valid":
        raise ValueError("vectorized_filter's mode 'valid' changes the shape, which dask blocks cannot: use "
                         "another mode and slice the result")
    return _windows(ndim, dict(a, origin=0 if a.get("origin") is None else a["origin"]))


def _unknown(name):
    def needs_depth(ndim, a):
        raise ValueError(f"{name} calls a function of yours, whose reach gpufilt cannot know: give depth=, "
                         "the number of elements it reads on each side (an int, or one per axis)")
    return needs_depth


# How far each filter reads around an output element, from its arguments
# (scipy's names, defaults applied): [(before, after)] per axis, or None
# when any output may depend on the whole array.
_REACH: dict[str, Callable[[int, dict], Any]] = {
    "correlate1d": lambda n, a: _one_axis(n, a["axis"], _window(np.size(a["weights"]), a["origin"])),
    "convolve1d": lambda n, a: _one_axis(n, a["axis"], _window(np.size(a["weights"]), a["origin"], True)),
    "correlate": lambda n, a: _windows(n, dict(a, footprint=a["weights"])),
    "convolve": lambda n, a: _windows(n, dict(a, footprint=a["weights"]), flipped=True),
    "gaussian_filter1d": lambda n, a: _one_axis(n, a["axis"], (_radius(a["sigma"], a["truncate"], a["radius"]),) * 2),
    "gaussian_filter": _gaussians,
    "gaussian_laplace": lambda n, a: _gaussians(n, a, derivatives=True),
    "gaussian_gradient_magnitude": lambda n, a: _gaussians(n, a, derivatives=True),
    "uniform_filter1d": lambda n, a: _one_axis(n, a["axis"], _window(a["size"], a["origin"])),
    "minimum_filter1d": lambda n, a: _one_axis(n, a["axis"], _window(a["size"], a["origin"])),
    "maximum_filter1d": lambda n, a: _one_axis(n, a["axis"], _window(a["size"], a["origin"])),
    "uniform_filter": lambda n, a: _windows(n, a),
    "minimum_filter": lambda n, a: _windows(n, a),
    "maximum_filter": lambda n, a: _windows(n, a),
    "median_filter": lambda n, a: _windows(n, a),
    "rank_filter": lambda n, a: _windows(n, a),
    "percentile_filter": lambda n, a: _windows(n, a),
    "sobel": lambda n, a: [(1, 1)] * n,
    "prewitt": lambda n, a: [(1, 1)] * n,
    "laplace": lambda n, a: _spread(n, _args.check_axes(a.get("axes"), n), [(1, 1)] * n),
    "generic_laplace": _unknown("generic_laplace"),
    "generic_gradient_magnitude": _unknown("generic_gradient_magnitude"),
    "grey_erosion": lambda n, a: _windows(n, a, symmetric=True),
    "grey_dilation": lambda n, a: _windows(n, a, symmetric=True),
    "morphological_gradient": lambda n, a: _windows(n, a, symmetric=True),
    "morphological_laplace": lambda n, a: _windows(n, a, symmetric=True),
    "grey_opening": lambda n, a: _windows(n, a, repeat=2, symmetric=True),
    "grey_closing": lambda n, a: _windows(n, a, repeat=2, symmetric=True),
    "white_tophat": lambda n, a: _windows(n, a, repeat=2, symmetric=True),
    "black_tophat": lambda n, a: _windows(n, a, repeat=2, symmetric=True),
    "binary_erosion": _binary,
    "binary_dilation": _binary,
    "binary_opening": lambda n, a: _binary(n, a, repeat=2),
    "binary_closing": lambda n, a: _binary(n, a, repeat=2),
    "generic_filter": lambda n, a: _windows(n, a),
    "generic_filter1d": lambda n, a: _one_axis(n, a["axis"], _window(a["filter_size"], a["origin"])),
    "vectorized_filter": lambda n, a: _vectorized(n, a),
    "binary_propagation": lambda n, a: None,
    "binary_fill_holes": lambda n, a: None,
}

# Filters of Fourier transforms: each element's factor depends on its
# position in the whole transform, not on its neighbours.
_FOURIER = ("fourier_gaussian", "fourier_uniform", "fourier_ellipsoid", "fourier_shift")

# Array arguments laid over the input element by element (gathered block by
# block with it, halo included).
_ALIGNED = ("mask",)


# ------------------------------------------------------------------ steps

@dataclass(frozen=True)
class _Step:
    """One filter of a chain: the function, its keyword arguments (input
    and aligned arrays left out), its reach per axis (None: the whole array),
    which axes it wraps, and its aligned arrays' names."""
    function: Callable
    kwargs: dict
    reach: tuple | None
    wrap: tuple
    aligned: tuple = ()
    fourier: bool = False

    def __call__(self, block, *aligned):
        kwargs = self.kwargs
        if kwargs.get("threads", 0) is None and isinstance(block, np.ndarray):
            # Dask runs a task per worker thread already: a task using every
            # core too would oversubscribe them (2x slower on two cores).
            kwargs = {**kwargs, "threads": 1}
        return self.function(block, **kwargs, **dict(zip(self.aligned, aligned)))


def _ndimage():
    from . import ndimage
    return ndimage


def _function(function):
    """A gpufilt.ndimage function, given or named."""
    ndimage = _ndimage()
    if isinstance(function, str):
        if function not in ndimage.__all__:
            raise ValueError(f"unknown filter {function!r}: gpufilt.ndimage provides {', '.join(ndimage.__all__)}")
        return getattr(ndimage, function)
    return function


def _bound(function, args, kwargs):
    """The call's arguments by scipy's names, defaults applied, input left out."""
    signature = inspect.signature(function)
    try:
        bound = signature.bind(None, *args, **kwargs)
    except TypeError as error:
        raise TypeError(f"{function.__name__}: {error}") from None
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    arguments.pop(next(iter(signature.parameters)))
    return arguments


def _depth(depth, ndim):
    """A user's depth= (an int, or one per axis) as (before, after) per axis."""
    values = _args.normalize_sequence(depth, ndim, "depth")
    reach = []
    for d in values:
        d = _args._scalar(d)
        if not isinstance(d, numbers.Integral) or isinstance(d, bool) or d < 0:
            raise ValueError(f"depth must be a non-negative int or one per axis, not {depth!r}")
        reach.append((int(d), int(d)))
    return reach


def _wrapped_axes(ndim, arguments, reach):
    """Which axes the step reads across the array's ends ('wrap' modes)."""
    mode = arguments.get("mode", "reflect")
    if isinstance(mode, str):
        modes = [mode] * ndim
    else:
        # A mode a listed axis, in the order of `axes` (scipy's), or one for every axis.
        axes = _args.check_axes(arguments.get("axes"), ndim)
        modes = _spread(ndim, axes, list(mode), default="reflect") if len(mode) == len(axes) else list(mode)
    return tuple(m in ("wrap", "grid-wrap") and r != (0, 0) for m, r in zip(modes, reach))


def _step(function, ndim, args=(), kwargs=None, depth=None):
    """A _Step from a call of a gpufilt.ndimage function (or any function
    of a block with its `depth`)."""
    function = _function(function)
    kwargs = dict(kwargs or {})
    name = getattr(function, "__name__", "")
    public = getattr(_ndimage(), name, None)
    known = public is not None and function in (public, getattr(public, "__wrapped__", None))
    if known:
        function = public  # the module's own object: tasks pickle it by name
    if not known and depth is None:
        raise ValueError(f"{function!r} is not a gpufilt.ndimage function: give its depth (the elements it reads on "
                         "each side of an output: 0 for an element-wise function)")
    arguments = _bound(function, args, kwargs) if known else dict(kwargs)
    output = arguments.get("output")
    if output is not None and not _dispatch._is_dtype_like(output):
        raise ValueError("output= an array is not possible with dask arrays (they are immutable): give a dtype, "
                         "or write the result with dask.array.store")
    if arguments.get("stream") is not None:
        raise ValueError("stream= is not taken with dask arrays: each task runs on its worker's current stream")
    arguments.pop("stream", None)
    extra = arguments.pop("kwargs", None)  # the derivative filters' keywords for gaussian_filter
    if extra:
        arguments.update(extra)
    if known and name in _FOURIER:
        return _Step(function, arguments, tuple([(0, 0)] * ndim), (False,) * ndim, fourier=True)
    if depth is not None:
        reach = _depth(depth, ndim)
    else:
        reach = _REACH[name](ndim, {**arguments, "kwargs": extra})
    aligned = tuple(n for n in _ALIGNED if arguments.get(n) is not None)
    arguments = {k: v for k, v in arguments.items() if k not in aligned}
    if reach is None:
        return _Step(function, arguments, None, (False,) * ndim, aligned)
    return _Step(function, arguments, tuple(reach), _wrapped_axes(ndim, arguments, reach), aligned)


def depth_of(function, ndim: int, *args, **kwargs) -> list[tuple[int, int]]:
    """How many elements a gpufilt.ndimage call reads on each side of an
    output, per axis: the halo a block needs.

    Parameters
    ----------
    function : callable or str
        A gpufilt.ndimage function, or its name.
    ndim : int
        The rank of the input.
    *args, **kwargs
        The call's other arguments, as the function takes them.

    Returns
    -------
    depth : list of (int, int)
        (before, after) per axis.

    Examples
    --------
    >>> from gpufilt.dask import depth_of
    >>> depth_of("gaussian_filter", 2, sigma=2)
    [(8, 8), (8, 8)]
    >>> depth_of("uniform_filter", 2, size=4, axes=1)
    [(0, 0), (2, 1)]
    """
    step = _step(function, ndim, args, kwargs)
    if step.reach is None:
        raise ValueError(f"{step.function.__name__} with these arguments may read the whole array")
    return list(step.reach)


# ------------------------------------------------------------- the blocks

def _library(array):
    """numpy or cupy, for a chunk."""
    return importlib.import_module("cupy" if type(array).__module__.startswith("cupy") else "numpy")


def _cut_and_join(nested, pieces, move=None):
    """One array from a nested list of chunks (one level per axis), each
    cut to its piece (and moved by `move`, where given): a view, without a
    copy, where the pieces are views of one array that tile a box of it
    (dask.array.from_array of an array in memory), else a concatenation."""
    cut = _cut(nested, pieces)
    if move is not None:
        cut = _map_leaves(move, cut)
    return _view_of_one_array(cut) if len(pieces) else cut


def _leaves(nested):
    if isinstance(nested, (list, tuple)):
        return [leaf for item in nested for leaf in _leaves(item)]
    return [nested]


def _map_leaves(function, nested):
    if isinstance(nested, list):
        return [_map_leaves(function, item) for item in nested]
    return function(nested)


def _cut(nested, pieces, index=()):
    if len(index) == len(pieces):
        # A chunk as long as its piece along an axis is that piece: either
        # the piece is the whole chunk, or a task of its own cut it out
        # already (_input_keys).
        return nested[tuple(slice(None) if n == hi - lo else slice(lo, hi)
                            for n, (_, lo, hi) in zip(nested.shape, (pieces[a][i] for a, i in enumerate(index))))]
    return [_cut(sub, pieces, index + (i,)) for i, sub in enumerate(nested)]


def _join(parts):
    """The concatenation of a nested list of pieces (one level per axis),
    each copied once into one new array (concatenating level by level
    copies the inner levels' data again at each level above)."""
    leaves = _leaves(parts)
    if len(leaves) == 1:
        return leaves[0]
    library = _library(leaves[0])
    joined = library.empty(_joined_shape(parts), library.result_type(*(leaf.dtype for leaf in leaves)))
    _place(parts, joined, (0,) * joined.ndim)
    return joined


def _place(parts, joined, origin, axis=0):
    """Copy each piece of `parts` where the concatenation puts it in `joined`, from `origin` on."""
    if not isinstance(parts, list):
        joined[tuple(slice(o, o + n) for o, n in zip(origin, parts.shape))] = parts
        return
    at = list(origin)
    for part in parts:
        _place(part, joined, tuple(at), axis + 1)
        at[axis] += _first_leaf(part).shape[axis]


def _address(array):
    return array.data.ptr if hasattr(array.data, "ptr") else array.__array_interface__["data"][0]


def _first_leaf(item):
    while isinstance(item, list):
        item = item[0]
    return item


def _view_of_one_array(cut):
    """The pieces as one view of the array they are all views of, when
    they tile a box of it in order; else their concatenation."""
    leaves, stack = [], [cut]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        else:
            leaves.append(item)
    first = _first_leaf(cut)
    if len(leaves) == 1 or first.base is None or any(
            leaf.base is not first.base or leaf.strides != first.strides for leaf in leaves):
        return _join(cut)
    # The box from the first piece on: inside the pieces' array when they
    # tile it, which _tiles checks (each piece where the box puts it, and
    # their lengths add up to the box's).
    view = _library(first).lib.stride_tricks.as_strided(first, _joined_shape(cut), first.strides)
    return view if _tiles(cut, view) else _join(cut)


def _joined_shape(cut):
    """The shape of the concatenation of a nested list of pieces."""
    shape, level = list(_first_leaf(cut).shape), cut
    for axis in range(len(shape)):
        shape[axis] = sum(_first_leaf(part).shape[axis] for part in level)
        level = level[0]
    return tuple(shape)


def _tiles(cut, view, axis=0, origin=None):
    """Whether each piece sits in `view` where the concatenation puts it."""
    origin = origin or [0] * view.ndim
    if not isinstance(cut, list):
        return _address(cut) == _address(view) + sum(o * st for o, st in zip(origin, view.strides))
    at = list(origin)
    for part in cut:
        if not _tiles(part, view, axis + 1, at):
            return False
        at[axis] += _first_leaf(part).shape[axis]
    return True


@dataclass(frozen=True)
class _Block:
    """What one task computes: the steps, the pieces of chunks it gathers
    per axis ((chunk, start, stop) in order), where each step's result is
    cut (`crops`, see _crops) and where the own elements then lie, and
    where it runs: `gpu`, a GPU id for host chunks
    streamed through that GPU (the result comes back to the host), or None
    to run where its own chunk is (`home`: that chunk's place among the
    gathered ones), on the CPU or on that chunk's GPU."""
    steps: tuple
    pieces: tuple
    own: tuple
    home: tuple = ()
    gpu: int | None = None
    crops: tuple = ()

    def __call__(self, *gathered):
        if self.gpu is not None:
            return self._through_gpu(gathered)
        gpu = _home_device(gathered[0], self.home)
        if gpu is None:
            return self._filter([self._gather(g) for g in gathered])
        with _gpus.lease(gpu) as lane:
            def move(piece):  # a halo from another GPU comes GPU to GPU
                return _gpus.to_device(piece, lane)
            result = self._filter([self._gather(g, move) for g in gathered])
        return _gpus.finished(result, inputs=_leaves(gathered))

    def _through_gpu(self, gathered):
        """Host chunks filtered on GPU self.gpu: to it and back through a
        lane's pinned buffers (gpufilt._gpus)."""
        with _gpus.lease(self.gpu, streaming=True) as lane:
            return _gpus.download(self._filter([_gpus.upload(self._gather(g), lane) for g in gathered]), lane)

    def _gather(self, nested, move=None):
        """The gathered chunks cut to their pieces (each moved by `move`
        where given) and joined."""
        if self.pieces:
            return _cut_and_join(nested, self.pieces, move)
        return nested if move is None else move(nested)  # a 0-d block

    def _filter(self, arrays):
        block = _run_steps(self.steps, self.crops, arrays[0], arrays[1:])
        return block[self.own] if self.own else block  # a 0-d block stays an array


def _run_steps(steps, crops, block, aligned=()):
    """The steps on a gathered block (with their aligned arrays, the masks),
    each step's result cut by crops[k] to what the later steps read (see
    _crops), the aligned arrays with it."""
    for k, step in enumerate(steps):
        shape = np.shape(block)
        block = step(block, *aligned[:len(step.aligned)])
        if np.shape(block) != shape:  # the later steps' cuts and the own elements would land elsewhere
            raise ValueError(f"{getattr(step.function, '__name__', step.function)!r} returned a block of shape "
                             f"{np.shape(block)} for one of {shape}: each step must keep its block's shape")
        aligned = aligned[len(step.aligned):]
        if k < len(crops):
            block, aligned = block[crops[k]], [a[crops[k]] for a in aligned]
    return block


def _home_device(nested, home):
    """The GPU of a task's own chunk among the gathered ones; None on the host."""
    for i in home:
        nested = nested[i]
    return _gpus.device_of(_first_leaf(nested))


def _empty_block(meta, shape):
    """The result of a chunk of length 0: an empty array of the run's library and dtype."""
    return _library(meta).empty(shape, meta.dtype)


def _ranges(n, first, stop, before, after, wrap):
    """The input along one axis that the output elements [first, stop)
    read: contiguous ranges [lo, hi) of the array in order, and where those
    elements start in what the ranges hold."""
    lo, hi = first - before, stop + after
    if wrap and hi - lo >= n:
        # The whole axis: the filter's own wrap mode then reads across the
        # ends as far as it needs (a halo wider than the array would repeat it).
        return [(0, n)], first
    if not wrap:
        # A block at an end also reads what the mode reflects back from
        # inside the array ('mirror', 'reflect'): up to the reach beyond
        # the end, and in a chain each step reflects its own (twice the
        # whole reach bounds it).
        edge = 2 * (before + after) + 1
        if lo < 0:
            hi = max(hi, edge)
        if hi > n:
            lo = min(lo, n - edge)
        lo, hi = max(0, lo), min(n, hi)
    ranges = []
    g = lo
    while g < hi:  # across an end (at most once each side: see above)
        at = g % n
        take = min(hi - g, n - at)
        ranges.append((at, at + take))
        g += take
    return ranges, first - lo


def _pieces(starts, first, stop, before, after, wrap):
    """_ranges cut at the chunks' bounds: (chunk, start in chunk, stop in
    chunk) in order. `starts`: where each chunk starts, then the length."""
    ranges, offset = _ranges(starts[-1], first, stop, before, after, wrap)
    pieces = []
    for lo, hi in ranges:
        while lo < hi:
            chunk = bisect.bisect_right(starts, lo) - 1
            end = min(hi, starts[chunk + 1])
            pieces.append((chunk, lo - starts[chunk], end - starts[chunk]))
            lo = end
    return pieces, offset


# On a dask.distributed cluster, the halo pieces of chunks larger than
# this are cut out by tasks of their own, so that only the pieces travel
# between workers (see _cut_above); smaller chunks travel whole.
# A worker fetches a chunk once for all its tasks, and an extra task costs
# more than a small chunk's trip: on a local cluster of two processes here
# (2 cores), a gaussian (sigma 1) took 96 / 163 / 666 ms with whole chunks
# of 1 / 8 / 64 MiB against 378 / 458 / 1056 ms with the pieces cut apart.
# Large chunks cross a network, or go through the host between GPUs, and a
# worker would hold its neighbours' whole chunks: dask-cuda on two H200s
# with 1 GiB chunks took 594 ms for that gaussian with the pieces cut apart.
CUT_APART_BYTES = 64 * 2**20


def _input_keys(array, pieces, layer, cut_name, cut_above, index=(), bounds=()):
    """The keys of what a block gathers from `array`, a nested list with a
    level per axis: the chunks' own keys, but for each piece of a chunk of
    more than `cut_above` bytes (None: none) that is not the whole chunk,
    the key of a task that cuts it out, added to `layer` (under `cut_name`:
    one task a piece however many blocks read it)."""
    axis = len(index)
    if axis == len(pieces):
        shape = [array.chunks[ax][i] for ax, (i, _, _) in enumerate(bounds)]
        whole = all(lo == 0 and hi == n for n, (_, lo, hi) in zip(shape, bounds))
        if whole or cut_above is None or math.prod(shape) * array.dtype.itemsize <= cut_above:
            return (array.name, *index)
        key = (cut_name, *index, *(b for _, lo, hi in bounds for b in (lo, hi)))
        layer[key] = (operator.getitem, (array.name, *index), tuple(slice(lo, hi) for _, lo, hi in bounds))
        return key
    return [_input_keys(array, pieces, layer, cut_name, cut_above, index + (piece[0],), bounds + (piece,))
            for piece in pieces[axis]]


def _cut_above():
    """CUT_APART_BYTES where dask's current scheduler is a dask.distributed
    Client, else None. A Client's workers fetch a task's inputs whole from
    the worker that holds them, so the halos of large chunks are cut out by
    tasks of their own, where the chunks live, and only those pieces travel
    (dask's map_overlap cuts every halo apart). In one process (dask's
    threads, gpufilt's GPUs) a block's task cuts its halos itself: one task
    a block."""
    return CUT_APART_BYTES if _cuts_halos_apart() else None


def _cuts_halos_apart():
    """Whether dask's current scheduler is a dask.distributed Client."""
    distributed = sys.modules.get("distributed")
    if distributed is None:  # no Client without it (and importing it takes a while)
        return False
    import dask.base
    try:
        get = dask.base.get_scheduler()
    except RuntimeError:
        # What dask.compute refuses, not a graph's building: an asynchronous
        # Client (client.compute runs the graph), or scheduler="distributed"
        # before its Client starts. Either way a Client runs the graph.
        return True
    return isinstance(getattr(get, "__self__", None), distributed.Client)


# A GPU block's halo along the last axis (the contiguous one in C order)
# is widened to whole groups of this many bytes from the array's start:
# the gathered block's rows then start on aligned addresses and span whole
# groups, which the GPU kernels' vector loads need. Measured on an H200,
# the blocks of 512 MiB chunks of float32 with a halo of 1 (130 x 1025 x
# 1026 from x = 1023 on; widened, 1032 from x = 1020 on), ms: gaussian
# sigma 1 1.081 -> 0.918, sigma 2 1.549 -> 1.432, median 3 1.123 -> 1.107.
# Wider groups (32 to 128 bytes) gained nothing more. On the CPU it would
# be work for nothing.
GPU_ALIGNMENT = 16


def _alignment_group(x, gpus):
    """The elements of GPU_ALIGNMENT bytes of x, for blocks run on a GPU; else 1."""
    on_gpu = gpus is not None or _library(x._meta) is not np
    return max(1, GPU_ALIGNMENT // x.dtype.itemsize) if on_gpu else 1


def _widened(first, stop, before, after, group):
    """(before, after) grown so that the range they read, [first - before,
    stop + after), starts and stops on multiples of `group`."""
    lo, hi = first - before, stop + after
    return before + lo % group, after + (-hi) % group


def _crops(steps, spans, owns, shape, wrap, group):
    """Where each step's result is cut before the next step reads it, and
    then where the block's own elements lie: what the later steps read is
    the range _ranges gives for their reach alone (the steps' reach shrinks
    along the chain), and a step's result is exact there. `spans` and
    `owns`: per axis, the gathered range and the own elements' range, [lo,
    hi) in the array; a cut along the last axis is rounded out to `group`
    (see GPU_ALIGNMENT). Wrapped axes are not cut."""
    current, crops = list(spans), []
    for k in range(len(steps) - 1 if spans else 0):  # (a 0-d block has nothing to cut)
        cut = []
        for ax, ((lo, hi), (first, stop)) in enumerate(zip(current, owns)):
            if not wrap[ax]:
                before = sum(s.reach[ax][0] for s in steps[k + 1:])
                after = sum(s.reach[ax][1] for s in steps[k + 1:])
                if ax == len(owns) - 1:
                    before, after = _widened(first, stop, before, after, group)
                [(needed_lo, needed_hi)], _ = _ranges(shape[ax], first, stop, before, after, False)
                current[ax] = (max(lo, needed_lo), min(hi, needed_hi))
            cut.append(slice(current[ax][0] - lo, current[ax][1] - lo))
        crops.append(tuple(cut))
    own = tuple(slice(first - lo, stop - lo) for (lo, _), (first, stop) in zip(current, owns))
    return tuple(crops), own


def _halo_run(x, aligned, steps, meta, gpus=None):
    """The steps of one run on every block of x, with one exchange of
    halos: the run's summed reach, taken across the ends on wrapped axes.
    With `gpus` (ids), host blocks run on those GPUs (_gpus.placement)."""
    da = _dask_array()
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph
    reach = [(sum(s.reach[ax][0] for s in steps), sum(s.reach[ax][1] for s in steps)) for ax in range(x.ndim)]
    wrap = [any(s.wrap[ax] for s in steps) for ax in range(x.ndim)]
    aligned = [a.rechunk(x.chunks) for a in aligned]
    cut_above = _cut_above()
    name = "gpufilt-" + tokenize(x.name, [a.name for a in aligned], steps, reach, wrap, gpus, cut_above)
    starts = [np.concatenate([[0], np.cumsum(c)]).tolist() for c in x.chunks]
    indices = list(itertools.product(*(range(len(c)) for c in x.chunks)))
    on = _gpus.placement(len(indices), gpus) if gpus else [None] * len(indices)
    group = _alignment_group(x, gpus)
    layer = {}
    for index, gpu in zip(indices, on):
        shape = tuple(x.chunks[ax][i] for ax, i in enumerate(index))
        if 0 in shape:  # a chunk of length 0: nothing to filter
            layer[(name, *index)] = (_empty_block, meta, shape)
            continue
        pieces, spans, owns, home = [], [], [], []
        for ax, i in enumerate(index):
            first, stop = starts[ax][i], starts[ax][i + 1]
            before, after = reach[ax]
            if ax == x.ndim - 1 and not wrap[ax] and reach[ax] != (0, 0):
                before, after = _widened(first, stop, before, after, group)
            axis_pieces, offset = _pieces(starts[ax], first, stop, before, after, wrap[ax])
            pieces.append(axis_pieces)
            lo = first - offset
            spans.append((lo, lo + sum(hi - lo for _, lo, hi in axis_pieces)))
            owns.append((first, stop))
            home.append(next(k for k, (chunk, _, _) in enumerate(axis_pieces) if chunk == i))
        crops, own = _crops(steps, spans, owns, x.shape, wrap, group)
        block = _Block(tuple(steps), tuple(pieces), own, tuple(home), gpu, crops)
        layer[(name, *index)] = (block, *(_input_keys(a, pieces, layer, "piece-" + a.name + "-" + name, cut_above)
                                          for a in (x, *aligned)))
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[x, *aligned])
    return da.Array(graph, name, chunks=x.chunks, meta=meta)


def _whole_run(x, aligned, step, meta):
    """A step that may read the whole array, on the whole array as one block."""
    _args.warn_at_caller(f"{step.function.__name__}: any element may depend on any other, so the whole array "
                         f"({x.nbytes / 2**20:.0f} MiB) is gathered into one block", WholeArrayWarning)
    whole = [a.rechunk(a.shape) for a in (x, *aligned)]
    result = whole[0].map_blocks(step, *whole[1:], meta=meta)
    return result.rechunk(x.chunks)


def _fourier_block(block, step, block_info=None):
    info = block_info[0]
    starts = tuple(lo for lo, _ in info["array-location"])
    a = step.kwargs
    work = importlib.import_module("gpufilt._fourier").BLOCKWISE[step.function.__name__]
    parameter = next(v for k, v in a.items() if k not in ("n", "axis", "output"))
    gpu = _gpus.device_of(block)
    if gpu is None:
        return work(block, parameter, a["n"], a["axis"], a["output"], grid=(tuple(info["shape"]), starts))
    with _gpus.lease(gpu):  # on the GPU that holds the block (chunks spread over GPUs: to_gpus)
        result = work(block, parameter, a["n"], a["axis"], a["output"], grid=(tuple(info["shape"]), starts))
    return _gpus.finished(result, inputs=(block,))


def _joins(run, step):
    """Whether `step` can share the halo exchange of `run`: both read
    neighbours only, and along each axis every step that reads neighbours
    agrees on whether it reads them across the ends ('wrap') or not."""
    if any(s.reach is None or s.fourier for s in (*run, step)):
        return False
    for ax in range(len(step.wrap)):
        if len({s.wrap[ax] for s in (*run, step) if s.reach[ax] != (0, 0)}) > 1:
            return False
    return True


def _runs(steps):
    """The steps in runs that each share one exchange of halos."""
    runs = []
    for step in steps:
        if runs and _joins(runs[-1], step):
            runs[-1].append(step)
        else:
            runs.append([step])
    return runs


def _meta(library, ndim, dtype, steps, aligned_dtypes=()):
    """The result of each step on a one-element array of the library and
    dtype (as empty arrays): the dtypes and libraries of the results, and
    any argument error raised before a task runs."""
    probe = library.zeros((1,) * ndim, dtype)
    metas = []
    it = iter(aligned_dtypes)
    for step in steps:
        extras = [library.zeros((1,) * ndim, next(it)) for _ in step.aligned]
        if step.fourier:
            probe = _fourier_block(probe, step, [{"array-location": [(0, 1)] * ndim, "shape": (1,) * ndim}])
        else:
            probe = step(probe, *extras)
        metas.append(probe[(slice(0, 0),) * ndim])
    return metas


def _apply_steps(x, steps, aligned, gpus=None):
    aligned = list(aligned)
    if gpus is not None:
        gpus = _gpus_for(x, steps, aligned, gpus)
    if not steps:
        return x
    metas = _meta(_library(x._meta), x.ndim, x.dtype, steps, [a.dtype for a in aligned])
    if x.size == 0:
        return x.map_blocks(lambda b: b.astype(metas[-1].dtype), meta=metas[-1])
    done = 0
    for run in _runs(steps):
        count = sum(len(s.aligned) for s in run)
        run_aligned, aligned = aligned[:count], aligned[count:]
        meta = metas[done + len(run) - 1]
        done += len(run)
        if run[0].fourier:
            x = x.map_blocks(_fourier_block, run[0], meta=meta)
        elif run[0].reach is None:
            x = _whole_run(x, run_aligned, run[0], meta)
        else:
            x = _halo_run(x, run_aligned, run, meta, gpus)
    return x


def _gpus_for(x, steps, aligned, gpus):
    """gpus= checked against the chain: host chunks (masks too), filters
    with halos."""
    if any(_library(a._meta) is not np for a in (x, *aligned)):
        raise ValueError("gpus= streams host chunks (and masks) through GPUs; cupy chunks run on the GPU that "
                         "holds them (gpufilt.dask.to_gpus spreads chunks over GPUs)")
    if any(s.fourier or s.reach is None for s in steps):
        raise ValueError("gpus= runs filters that read their neighbours: not Fourier filters or whole-array "
                         "operations (binary_fill_holes, binary_propagation, iterations < 1)")
    return _gpus.devices(gpus)


def to_gpus(x: Any, gpus: Any = "all") -> Any:
    """A dask array's chunks spread over GPUs, as cupy arrays: contiguous
    runs of chunks (in C order) on each GPU, so that most halos stay on one
    GPU. The filters of gpufilt.ndimage and chain then run each block on the
    GPU that holds it, copying halos GPU to GPU.

    A chunk already on its GPU stays as it is (no copy). Pass cupy chunks
    made outside gpufilt (``map_blocks(cupy.asarray)``, your own kernels)
    through to_gpus too: a halo copied from a chunk that gpufilt did not
    make or place waits for all the work queued on the chunk's GPU, since
    its writer may still be running there (on 2 H200s that made a 16 GiB
    median 1.5x slower).

    Parameters
    ----------
    x : dask.array.Array
        The input, numpy or cupy chunks.
    gpus : "all", int or sequence of int, optional
        The GPUs: every visible one (default), or their ids.

    Returns
    -------
    placed : dask.array.Array
        Lazily, x's values and chunks in cupy arrays on those GPUs. Call
        ``.persist()`` to keep them there across computations.

    Examples
    --------
    With CuPy and GPUs (skipped where there are none):

    >>> import cupy  # doctest: +SKIP
    >>> import numpy as np, dask.array as da
    >>> from gpufilt import ndimage
    >>> from gpufilt.dask import to_gpus
    >>> volume = np.random.default_rng(0).random((64, 32, 32), dtype=np.float32)
    >>> x = to_gpus(da.from_array(volume, chunks=(16, 32, 32))).persist()  # doctest: +SKIP
    >>> y = ndimage.gaussian_filter(x, 2).persist()  # each block on its own GPU   # doctest: +SKIP
    >>> host = y.map_blocks(cupy.asnumpy, meta=np.empty((0, 0, 0), np.float32)).compute()  # doctest: +SKIP
    >>> bool(np.allclose(host, ndimage.gaussian_filter(volume, 2), atol=1e-6))  # doctest: +SKIP
    True
    """
    if not is_dask_array(x):
        raise TypeError(f"to_gpus takes a dask array, not {type(x).__name__} (dask.array.from_array makes one)")
    ids = _gpus.devices(gpus)
    cupy = _gpus._cupy()
    numblocks = x.numblocks
    on = _gpus.placement(max(1, int(np.prod(numblocks))), ids)
    return x.map_blocks(_Placed(tuple(on), tuple(numblocks)), dtype=x.dtype,
                        meta=cupy.empty((0,) * x.ndim, x.dtype))


@dataclass(frozen=True)
class _Placed:
    """A chunk moved to its GPU (the placement of its block index)."""
    on: tuple
    numblocks: tuple

    def __call__(self, block, block_id=None):
        gpu = self.on[int(np.ravel_multi_index(block_id, self.numblocks))] if block_id else self.on[0]
        with _gpus.lease(gpu) as lane:
            placed = _gpus.to_device(block, lane)
            if placed is block:  # already there, put there outside gpufilt: complete once the lease ends
                _gpus.wait_for_default_stream(lane)
        return _gpus.finished(placed)


def _aligned_arrays(x, function, args, kwargs):
    """The arrays (masks) laid over x that a call passes, as dask arrays of x's chunks."""
    da = _dask_array()
    arguments = _bound(function, args, kwargs)
    arrays = []
    for name in _ALIGNED:
        value = arguments.get(name)
        if value is None:
            continue
        if not hasattr(value, "shape"):
            value = np.asarray(value)
        if tuple(value.shape) != x.shape:
            raise ValueError(f"{name} has shape {tuple(value.shape)}, the input {x.shape}: they must be equal")
        if not is_dask_array(value):
            value = da.from_array(value, chunks=x.chunks)
        arrays.append(value)
    return arrays


def apply(function: Callable, input: Any, *args, depth=None, **kwargs):
    """`function(input, *args, **kwargs)` for a dask array `input`: what
    gpufilt.ndimage's functions do with one (their entry point here)."""
    step = _step(function, input.ndim, args, kwargs, depth)
    aligned = _aligned_arrays(input, function, args, kwargs) if step.aligned else []
    return _apply_steps(input, [step], aligned)


def steps_of(steps, ndim):
    """_Steps from chain's (function, kwargs[, depth]) items."""
    made = []
    for item in steps:
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise ValueError(f"each step is (function, kwargs) or (function, kwargs, depth), not {item!r}")
        made.append(_step(item[0], ndim, (), dict(item[1]), item[2] if len(item) == 3 else None))
    return made


def chain(x: Any, steps: Sequence[Any], *, gpus: Any = None) -> Any:
    """Several gpufilt.ndimage filters, one after the other, on a dask
    array, with one exchange of halos: each block is read once, with the
    summed reach of the filters, and filtered by all of them.

    Parameters
    ----------
    x : dask.array.Array
        The input (numpy or cupy chunks).
    steps : sequence
        The filters in order, each ``(function, kwargs)`` where function is
        a gpufilt.ndimage function or its name, or ``(function, kwargs,
        depth)`` for any other function of a block (depth: the elements it
        reads on each side, an int or one per axis; 0 for an element-wise
        function such as a threshold).
    gpus : "all", int or sequence of int, optional
        Stream x's host (numpy) chunks through these GPUs: each block,
        with its halo, crosses to its GPU through a pinned buffer, is
        filtered there, and comes back, while other blocks cross (see
        gpufilt._gpus). Blocks go to the GPUs in contiguous runs. The
        default runs each block where its chunk is: numpy chunks on the
        CPU, cupy chunks on the GPU that holds them (to_gpus).

    Returns
    -------
    result : dask.array.Array
        Lazily, the last filter's result, with x's chunks: equal to the
        filters applied one after the other in memory (numpy chunks with
        gpus=). Steps that wrap along an axis that an earlier step does not
        (or the reverse), and filters that may read the whole array, start
        a new exchange.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from gpufilt import ndimage
    >>> from gpufilt.dask import chain
    >>> x = da.from_array(np.arange(64.0).reshape(8, 8) % 5, chunks=3)
    >>> edges = chain(x, [("gaussian_filter", {"sigma": 1}), (ndimage.sobel, {"axis": 0}),
    ...                   (np.abs, {}, 0)])
    >>> expected = np.abs(ndimage.sobel(ndimage.gaussian_filter(x.compute(), 1), axis=0))
    >>> bool(np.allclose(edges.compute(), expected))
    True
    """
    if not is_dask_array(x):
        raise TypeError(f"chain takes a dask array, not {type(x).__name__} (dask.array.from_array makes one)")
    made = steps_of(steps, x.ndim)
    aligned = []
    for item, step in zip(steps, made):
        if step.aligned:
            aligned += _aligned_arrays(x, _function(item[0]), (), dict(item[1]))
    return _apply_steps(x, made, aligned, gpus)


from ._zarr import filter_zarr  # noqa: E402 - it builds on this module's steps and halos
