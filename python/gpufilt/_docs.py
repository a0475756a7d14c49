"""The docstrings of gpufilt.ndimage's filters, numpy style, assembled from
one description per parameter (as scipy.ndimage's docfiller does), so that a
parameter reads the same in every filter that takes it."""
from __future__ import annotations

import textwrap

_MODES = "{'reflect', 'constant', 'nearest', 'mirror', 'wrap', 'grid-constant', 'grid-mirror', 'grid-wrap'}"

PARAMETERS = {
    "input": """input : array_like
    The array to filter: a numpy, cupy, torch, jax or numba array, anything
    with ``__dlpack__``, ``__cuda_array_interface__`` or the buffer protocol,
    or what numpy converts (lists, tuples, scalars, pandas objects), as
    scipy takes it. It is filtered where it lives: on the CPU, or on its
    CUDA device.""",
    "weights": """weights : array_like
    The weights, with one axis per filtered axis. Device arrays (cupy,
    torch) are read to the host: they are parameters of the kernels.""",
    "weights1d": """weights : array_like
    The 1-D sequence of weights. Device arrays (cupy, torch) are read to
    the host: they are parameters of the kernels.""",
    "sigma": """sigma : scalar or sequence of scalars
    Standard deviation of the Gaussian; a sequence gives one per filtered
    axis.""",
    "sigma1d": """sigma : scalar
    Standard deviation of the Gaussian.""",
    "order": """order : int or sequence of ints, optional
    0 smooths; 1, 2 or 3 convolve with that derivative of the Gaussian. A
    sequence gives one order per filtered axis. Default 0.""",
    "order1d": """order : int, optional
    0 smooths; 1, 2 or 3 convolve with that derivative of the Gaussian.
    Default 0.""",
    "truncate": """truncate : float, optional
    The filter reaches ``int(truncate * sigma + 0.5)`` elements each way.
    Default 4.0.""",
    "radius": """radius : int or sequence of ints, optional
    The filter's reach each way, overriding `truncate`.""",
    "size1d": """size : int
    Length of the window along `axis`.""",
    "size": """size : int or sequence of ints, optional
    Shape of a box window (one length per filtered axis); used where
    `footprint` is not given.""",
    "size_box": """size : int or sequence of ints, optional
    Length of the box along each filtered axis; lengths of 1 or less leave
    that axis as it is. Default 3.""",
    "footprint": """footprint : array_like, optional
    A boolean window of the elements taken into account, one axis per
    filtered axis (given instead of `size`).""",
    "rank": """rank : int
    The rank of the element returned within each window, from 0 (the
    smallest); negative counts from the end.""",
    "percentile": """percentile : float
    The percentile within each window, from 0 to 100 (negative counts from
    the end: -20 is 80).""",
    "axis": """axis : int, optional
    The axis filtered. Default -1.""",
    "axis_edge": """axis : int, optional
    The axis of the derivative; the other axes are smoothed. Default -1.""",
    "derivative2": """derivative2 : callable
    ``derivative2(input, axis, output, mode, cval, *extra_arguments,
    **extra_keywords)`` computes the second derivative along `axis` (it may
    call gpufilt's filters).""",
    "derivative": """derivative : callable
    ``derivative(input, axis, output, mode, cval, *extra_arguments,
    **extra_keywords)`` computes the first derivative along `axis` (it may
    call gpufilt's filters).""",
    "extra": """extra_arguments : sequence, optional
    More positional arguments for the derivative function.
extra_keywords : dict, optional
    More keyword arguments for the derivative function.""",
    "output": """output : array or dtype, optional
    Where the result goes: an array of the input's shape, written in place
    and returned (it may be the input itself), or the dtype of a new array.
    Default: a new array of the input's dtype, made by the input's library
    on its device.""",
    "mode": f"""mode : str, optional
    How the input extends beyond its edges, as scipy.ndimage: one of
    {_MODES}.
    Default 'reflect'.""",
    "modes": f"""mode : str or sequence of str, optional
    How the input extends beyond its edges, as scipy.ndimage: one of
    {_MODES},
    or a sequence of them, one per filtered axis. Default 'reflect'.""",
    "cval": """cval : scalar, optional
    The value beyond the edges with mode 'constant'. Default 0.0.""",
    "origin": """origin : int, optional
    Shifts the window: 0 centres it, positive values move it to the left.
    Default 0.""",
    "origins": """origin : int or sequence of ints, optional
    Shifts the window (one shift per filtered axis): 0 centres it, positive
    values move it to the left. Default 0.""",
    "axes": """axes : int or tuple of ints, optional
    The axes filtered. Default: all.""",
    "stream": """stream : int, cupy.cuda.Stream or torch.cuda.Stream, optional
    The CUDA stream a GPU call is queued on (a ``cudaStream_t`` as an int,
    or a stream object). Default: the current stream of the input's library
    (cupy's or torch's), else the legacy default stream. The call returns
    without waiting for the GPU. Ignored on the CPU.""",
    "threads": """threads : int, optional
    CPU threads for this call. Default: ``GPUFILT_NUM_THREADS``, else
    ``OMP_NUM_THREADS``, else all cores; at most 4 per CPU the process may
    run on. Ignored on the GPU.""",
    "size_grey": """size : int or sequence of ints, optional
    Shape of a flat box window; used where neither `footprint` nor
    `structure` is given.""",
    "footprint_grey": """footprint : array_like, optional
    A boolean window of the elements taken into account (flat).""",
    "structure_grey": """structure : array_like, optional
    Heights of a non-flat window (subtracted for an erosion, added for a
    dilation); with `footprint`, only its elements count. Non-flat windows
    run through the input's library (numpy or cupy), flat ones through
    gpufilt's minimum and maximum kernels.""",
    "structure": """structure : array_like, optional
    The structuring element (non-zero elements count); default
    generate_binary_structure(rank, 1), the faces' neighbours.""",
    "iterations": """iterations : int, optional
    How many times the operation is repeated; below 1, until nothing
    changes. Default 1.""",
    "mask": """mask : array_like, optional
    Only elements where `mask` is true change at each step.""",
    "output_binary": """output : array or dtype, optional
    Where the result goes: an array of the input's shape, written in
    place and returned, or a dtype. Default: a new bool array.""",
    "border_value": """border_value : int (0 or 1), optional
    The value beyond the edges. Default 0.""",
    "brute_force": """brute_force : bool, optional
    Accepted for scipy's signature; gpufilt chooses how to repeat (a pass
    over the array per step, or on the CPU, until nothing changes, one
    spread of what changes).""",
    "function": """function : callable, scipy.LowLevelCallable, numba cfunc, cupy.RawKernel or ReductionKernel
    What computes each output element from its window (see above).""",
    "function1d": """function : callable, scipy.LowLevelCallable, numba cfunc or cupy.RawKernel
    What computes each output line from its extended input line (see
    above).""",
    "filter_size": """filter_size : int
    Length of the window along `axis`.""",
    "extra_function": """extra_arguments : tuple, optional
    More positional arguments for a Python `function` (and a numba CUDA
    device function).
extra_keywords : dict, optional
    More keyword arguments for a Python `function`.""",
    "function_vectorized": """function : callable
    ``function(windows, axis=axes)``: reduces `windows`, an array whose
    last axes (`axis`) are the window's, over them, as numpy's reductions
    do. It takes arrays of the input's library (numpy or cupy).""",
    "size_vectorized": """size : int or tuple of ints, optional
    Shape of a box window (one length per filtered axis); give `size` or
    `footprint`, not both.""",
    "mode_vectorized": f"""mode : str, optional
    How the input extends beyond its edges: one of {_MODES[:-1]},
    'valid'}} ('valid': not at all, the output is smaller). Default
    'reflect'.""",
    "cval_vectorized": """cval : scalar, optional
    The value beyond the edges; only with mode 'constant'. Default 0.""",
    "batch_memory": """batch_memory : int, optional
    The most bytes of windows handed to `function` at once. Default 2**30.""",
    "kwargs": """**kwargs
    More keyword arguments for gaussian_filter (`truncate`, `radius`).""",
}

RETURNS = """Returns
-------
result : array
    The filtered array, of the input's library and on the input's device
    (numpy for lists and plain buffers); `output` itself when it is an
    array."""


# What every filter's description ends with.
ON_GPU = "On a cupy array the same call runs on its GPU and returns a cupy array."


def filter_doc(summary, description, parameters, example):
    """Sets a filter's docstring: `summary` line, `description` (and
    ON_GPU), the `parameters` (keys of PARAMETERS), the result, and a CPU
    `example` (a doctest)."""
    description = " ".join(f"{description} {ON_GPU}".split())
    parts = [summary, "", textwrap.fill(description, 76), "", "Parameters", "----------"]
    parts += [PARAMETERS[name] for name in parameters]
    parts += ["", RETURNS, "", "Examples", "--------", ">>> import numpy as np", ">>> from gpufilt import ndimage",
              textwrap.dedent(example).strip(), ""]

    def set_doc(func):
        func.__doc__ = "\n".join(parts)
        return func
    return set_doc


OPS_PARAMETERS = {
    "out": """out : array, optional
    Written in place and returned, on the inputs' device. Default: a new
    array of the first input's library on its device.""",
    "stream": PARAMETERS["stream"],
}


def numpy_sections(parameters, returns, example):
    """Appends numpy-style Parameters, Returns and Examples sections to a
    function's own docstring (its prose stays as written). `parameters` are
    ``(name, description)`` pairs or keys of OPS_PARAMETERS; `returns` is
    the Returns entry; `example` a doctest, run on the CPU by the suite."""
    def entry(item):
        if isinstance(item, str):
            return OPS_PARAMETERS[item]
        name, text = item
        return f"{name}\n" + textwrap.indent(textwrap.fill(" ".join(text.split()), 72), "    ")

    def add(func):
        prose = textwrap.dedent(func.__doc__ or "").strip()
        first, _, rest = prose.partition("\n")
        prose = first + ("\n" + textwrap.dedent(rest) if rest else "")
        parts = [prose, ""]
        if parameters:
            parts += ["Parameters", "----------", *map(entry, parameters), ""]
        parts += ["Returns", "-------", entry(returns), "", "Examples", "--------",
                  textwrap.dedent(example).strip(), ""]
        func.__doc__ = "\n".join(parts)
        return func
    return add
