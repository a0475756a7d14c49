"""generic_filter and generic_filter1d on CUDA arrays (_generic.py checks the
arguments and comes here for device input).

The function is the caller's device code: a cupy.RawKernel or
cupy.ReductionKernel, called as cupyx.scipy.ndimage calls it, or a numba
CUDA device function. So the kernel around it is built at run time, by
NVRTC (cupy.RawModule) or numba, once per function, dtype, rank and
footprint (shapes are arguments), and kept. It is kept small by leaving the
rest to what exists:
  - the boundary: the input is padded with scipy's mode (_dispatch.pad, the
    padding vectorized_filter uses), so a window is the padded array at fixed
    offsets and the kernel has no boundary math;
  - the output: the kernel writes float64 results into a temporary, which
    gpufilt's own copy (the _cuda module) converts into the output's dtype
    and layout with scipy's conversions (cast.hpp), bool outputs as scipy's
    bytes (_generic._run_into).
Everything is queued on one stream (the `stream=` argument, else the input
library's current one): no host synchronisation, no host copies.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from . import _dispatch
from ._generic import _PAD_MODES

# scipy's modes as numpy.pad/cupy.pad spell them, with scipy.ndimage's
# filter meaning: vectorized_filter's map but for grid-mirror, which the
# filters read as reflect ('symmetric') and SciPy 1.17's vectorized_filter
# as mirror ('reflect').
_PAD = {**{m: p for m, p in _PAD_MODES.items() if m != "valid"}, "grid-mirror": "symmetric"}

_THREADS = 128


def _cupy():
    try:
        import cupy
    except ImportError:
        raise TypeError("generic_filter on CUDA arrays needs cupy (pip install gpufilt[cuda])") from None
    return cupy


def _kind(function):
    """'raw', 'reduction' or 'numba' for the functions taken on the GPU; a
    TypeError naming what is accepted (cupyx raises TypeError too) for the
    rest."""
    name, module = type(function).__name__, type(function).__module__
    if module.startswith("cupy"):
        if name == "RawKernel":
            return "raw"
        if name == "ReductionKernel":
            if function.nin != 1 or function.nout != 1:
                raise TypeError("function: a ReductionKernel must have 1 input and output")
            return "reduction"
        if name == "ElementwiseKernel":
            raise TypeError("function: only ReductionKernel allowed (not ElementwiseKernel)")
    if _is_numba_device_function(function):
        return "numba"
    raise TypeError(f"function of type {type(function).__name__} cannot run on CUDA arrays: on the GPU "
                    "generic_filter takes a cupy.RawKernel or cupy.ReductionKernel (as cupyx.scipy.ndimage) or "
                    "a numba CUDA device function (numba.cuda.jit(device=True)); Python callables and "
                    "scipy.LowLevelCallable run on CPU (numpy) arrays")


def _is_numba_device_function(function):
    module = type(function).__module__
    return module.startswith(("numba", "numba_cuda")) and ".cuda" in module and \
        getattr(function, "targetoptions", {}).get("device", False)


def _kind1d(function):
    kind = _kind(function)
    if kind == "reduction":
        raise TypeError("function: generic_filter1d takes a cupy.RawKernel or a numba CUDA device function on "
                        "the GPU, not a ReductionKernel")
    return kind


def _check_extra(kind, extra_arguments, extra_keywords):
    if not isinstance(extra_arguments, tuple):
        from ._errors import ArgumentError
        raise ArgumentError("extra_arguments must be a tuple")
    if extra_keywords:
        raise TypeError("extra_keywords are not taken with a GPU function (pass values as extra_arguments to a "
                        "numba device function)")
    if extra_arguments and kind != "numba":
        raise TypeError("extra_arguments are taken only with a numba device function on the GPU (cupy kernels "
                        "take none, as in cupyx.scipy.ndimage)")


class _Launch:
    """The device, stream and cupy view of one call's input."""

    def __init__(self, src, stream):
        cupy = _cupy()
        self.cupy = cupy
        self.src = src
        self.stream_ptr = _dispatch.resolve_stream(stream, src)
        self.device = cupy.cuda.Device(src.device_id)
        with self.device:
            if stream is None and src.library == "cupy":
                self.stream = cupy.cuda.get_current_stream()
            elif self.stream_ptr == 0:
                self.stream = cupy.cuda.Stream.null
            elif hasattr(cupy.cuda.Stream, "from_external"):
                self.stream = cupy.cuda.Stream.from_external(_dispatch._StreamHandle(self.stream_ptr))
            else:
                self.stream = cupy.cuda.ExternalStream(self.stream_ptr, src.device_id)
        self.array = cupy.asarray(src.obj)  # a view (cupy, or the CUDA Array Interface / DLPack of others)

    def __enter__(self):
        self.device.__enter__()
        self.stream.__enter__()
        return self

    def __exit__(self, *exc):
        self.stream.__exit__(*exc)
        self.device.__exit__(*exc)
        return False


def _padded(launch, pad_width, mode, cval, values_dtype):
    """The input padded per scipy's `mode`, C-contiguous, of `values_dtype`."""
    cp = launch.cupy
    array = launch.array
    if array.dtype != values_dtype:
        array = array.astype(values_dtype)
    kwargs = {"constant_values": cval} if _PAD[mode] == "constant" else {}
    return cp.ascontiguousarray(_dispatch.pad(cp, array, pad_width, _PAD[mode], **kwargs))


def _values_dtype(function, kind, dtype, mode, cval):
    """The dtype the window's values are padded in: the input's (float16 as
    float32: cupy's float16 type needs its own headers). In constant mode,
    for a function of doubles (RawKernel, numba), a cval the dtype does not
    hold pads a float64 copy, so that windows see cval itself, as scipy's; a
    ReductionKernel sees values of the input's type (or of its input's own
    type where it names one), cval converted, as cupyx's."""
    dtype = np.dtype(np.float32) if dtype == np.float16 else np.dtype(dtype)
    if kind == "reduction" and function.in_params[0].dtype is not None:
        return np.dtype(function.in_params[0].dtype)
    if kind == "reduction" or _PAD[mode] != "constant" or _holds(dtype, cval):
        return dtype
    return np.dtype(np.float64)


def _holds(dtype, value):
    if dtype.kind == "f":
        return bool(np.isnan(value)) or float(dtype.type(value)) == value or not math.isfinite(value)
    if not math.isfinite(value) or value != int(value):
        return False
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    return info.min <= value <= info.max if info else value in (0.0, 1.0)


def generic_filter(src, function, mask, origins, mode, cval, output, extra_arguments, extra_keywords, stream):
    from ._generic import _output_dtype, _run_into
    kind = _kind(function)
    _check_extra(kind, extra_arguments, extra_keywords)
    out_dtype = _output_dtype(output, src)
    taps = int(mask.sum())
    coords = np.argwhere(mask)  # the window's cells, C order: the order scipy passes the values in
    pad_width = [(n // 2 + o, (n - 1) // 2 - o) for n, o in zip(mask.shape, origins)]

    def run(out):
        with _Launch(src, stream) as launch:
            cp = launch.cupy
            values_dtype = _values_dtype(function, kind, src.dtype, mode, cval)
            if src.ndim == 0 or 0 in src.shape:
                padded = launch.array.astype(values_dtype).reshape(src.shape)
            else:
                padded = _padded(launch, pad_width, mode, cval, values_dtype)
            results = cp.empty(src.shape, dtype=np.float64)
            if results.size:
                pstrides = tuple(s // padded.itemsize for s in padded.strides) or (1,)
                shape = tuple(src.shape) or (1,)
                if kind == "numba":
                    _numba_window_kernel(function, coords, src.ndim, extra_arguments, launch,
                                         padded.reshape(-1), results.reshape(-1), shape, pstrides)
                else:
                    kernel = _cupy_window_kernel(function, kind, values_dtype, out_dtype, coords, max(src.ndim, 1),
                                                 taps)
                    n = results.size
                    args = (padded, results, np.int64(n), *map(np.int64, shape), *map(np.int64, pstrides))
                    kernel((min(math.ceil(n / _THREADS), 65535 * 16),), (_THREADS,), args)
            _dispatch.copy_into(results, out, src, launch.stream_ptr)
    return _run_into(src, output, run, stream)


def generic_filter1d(src, function, filter_size, axis, origin, mode, cval, output, extra_arguments, extra_keywords,
                     stream):
    from ._generic import _run_into
    kind = _kind1d(function)
    _check_extra(kind, extra_arguments, extra_keywords)
    left = filter_size // 2 + origin
    if 0 in src.shape:  # nothing to filter (and nothing cupy.pad could extend)
        return _run_into(src, output, lambda out: None, stream)

    def run(out):
        with _Launch(src, stream) as launch:
            cp = launch.cupy
            pad_width = [(0, 0)] * src.ndim
            pad_width[axis] = (left, filter_size - 1 - left)
            padded = _padded(launch, pad_width, mode, cval, np.dtype(np.float64))
            lines_in = cp.ascontiguousarray(cp.moveaxis(padded, axis, -1)).reshape(-1, padded.shape[axis])
            results = cp.empty(lines_in.shape[:1] + (src.shape[axis],), dtype=np.float64)
            if results.size:
                if kind == "numba":
                    _numba_line_kernel(function, extra_arguments, launch, lines_in, results)
                else:
                    kernel = _cupy_line_kernel(function)
                    n = results.shape[0]
                    args = (lines_in, results, np.int64(n), np.int64(lines_in.shape[1]), np.int64(results.shape[1]))
                    kernel((min(math.ceil(n / _THREADS), 65535 * 16),), (_THREADS,), args)
            moved = cp.moveaxis(results.reshape(tuple(np.delete(src.shape, axis)) + (src.shape[axis],)), -1, axis)
            _dispatch.copy_into(moved, out, src, launch.stream_ptr)
    return _run_into(src, output, run, stream)


# ------------------------------------------------------------- cupy kernels

_CACHE = {}


def _memoised(function, key, build):
    """build() once per (function, key). The function is held with what was
    built from it: its id stays its own (cupy's and numba's kernels need not
    be hashable)."""
    key = (id(function),) + key
    if key not in _CACHE:
        _CACHE[key] = (function, build())
    return _CACHE[key][1]


def _typename(dtype):
    from cupy._core._scalar import get_typename
    return get_typename(np.dtype(dtype))


# The kernel around the caller's function: thread i (grid-stride) computes
# output element i (C order over the input's shape). Its window is the padded
# array at the base of element i plus each cell's offset.
_WINDOW_KERNEL = r"""
{preamble}

typedef {values_type} V;
{cells_space} long long gpufilt_cells[{cells_len}] = {{{cells}}};

extern "C" __global__ void gpufilt_generic_filter(const V* padded, double* results, long long n, {shape_args}) {{
  const long long shape[{ndim}] = {{{shape}}}, pstride[{ndim}] = {{{pstride}}};
  {values_decl}
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)blockDim.x * gridDim.x) {{
    long long rest = i, base = 0;
    for (int d = {ndim} - 1; d >= 0; --d) {{
      base += (rest % shape[d]) * pstride[d];
      rest /= shape[d];
    }}
    for (int t = 0; t < {taps}; ++t) {{
      long long offset = base;
      for (int d = 0; d < {ndim}; ++d) offset += gpufilt_cells[t * {ndim} + d] * pstride[d];
      values[t] = {read};
    }}
    {call}
  }}
}}
"""


def _cupy_window_kernel(function, kind, values_dtype, out_dtype, coords, ndim, taps):
    cells = coords.reshape(-1).tolist() if coords.size else [0]
    key = ("window", kind, str(values_dtype), str(out_dtype), ndim, tuple(cells), taps)

    def build():
        cupy = _cupy()
        values = max(taps, 1)
        if kind == "raw":
            preamble = "namespace raw_kernel {\n" + function.code.replace("__global__", "__device__") + "\n}"
            values_decl = f"double values[{values}];"
            read = "(double)padded[offset]"
            call = (f"double value = 0.0;\n    raw_kernel::{function.name}(values, {taps}, &value);\n"
                    "    results[i] = value;")
            options = tuple(function.options)
        else:
            preamble, out_type = _reduction_code(function, values_dtype, out_dtype)
            values_decl = f"V values[{values}];"
            read = "padded[offset]"
            call = (f"{out_type} value;\n    reduction_kernel::{function.name}(values, {taps}, value);\n"
                    "    results[i] = (double)value;")
            options = tuple(getattr(function, "options", ()))
        source = _WINDOW_KERNEL.format(
            preamble=preamble, values_type=_typename(values_dtype), cells_len=len(cells),
            # constant memory (64 KiB) where the cells fit, else global memory
            cells_space="__constant__" if len(cells) <= 4096 else "__device__ const",
            cells=", ".join(map(str, cells)), ndim=ndim,
            shape_args=", ".join([f"long long n{d}" for d in range(ndim)] + [f"long long p{d}" for d in range(ndim)]),
            shape=", ".join(f"n{d}" for d in range(ndim)), pstride=", ".join(f"p{d}" for d in range(ndim)),
            values_decl=values_decl, taps=taps, read=read, call=call)
        module = cupy.RawModule(code=source, options=options)
        return module.get_function("gpufilt_generic_filter")
    return _memoised(function, key, build)


def _reduction_code(rk, values_dtype, out_dtype):
    """A cupy.ReductionKernel's expressions as a device function of one
    window (the reduction cupyx's generic_filter builds from them): its
    template types bound as cupyx binds them, the input's to the values'
    type (the input's dtype), the output's to the output's dtype unless it
    is the input's template."""
    in_param, out_param = rk.in_params[0], rk.out_params[0]
    types = {}

    def ctype(param, dtype):
        if param.dtype is not None:
            return param.ctype
        name = _typename(dtype)
        types.setdefault(param.ctype, name)
        return types[param.ctype]
    in_type = ctype(in_param, values_dtype)
    out_type = ctype(out_param, values_dtype if out_param.ctype == in_param.ctype else
                     (np.uint8 if out_dtype == np.bool_ else out_dtype))
    typedefs = "\n".join(f"typedef {t} {name};" for name, t in types.items())
    code = f"""namespace reduction_kernel {{
{typedefs}
{rk.preamble}
struct _indexer {{  // the window's index, as cupyx's CIndexer gives it to the expressions
  long long _n, _i;
  __device__ long long size() const {{ return _n; }}
  __device__ void set(long long i) {{ _i = i; }}
  __device__ long long get() const {{ return _i; }}
}};
__device__ void {rk.name}(const {in_type}* _values, int _size, {out_type}& _result) {{
  _indexer _in_ind = {{_size, 0}}, _out_ind = {{1, 0}};
  #define REDUCE(a, b) ({rk.reduce_expr})
  #define POST_MAP(a) ({rk.post_map_expr})
  typedef {rk.reduce_type} _type_reduce;
  _type_reduce _s = _type_reduce({rk.identity if rk.identity is not None else ''});
  for (int _j = 0; _j < _size; ++_j) {{
    _in_ind.set(_j);
    const {in_type}& {in_param.name} = _values[_j];
    _type_reduce _a = static_cast<_type_reduce>({rk.map_expr});
    _s = REDUCE(_s, _a);
  }}
  _out_ind.set(0);
  {out_type}& {out_param.name} = _result;
  POST_MAP(_s);
  #undef REDUCE
  #undef POST_MAP
}}
}}"""
    return code, out_type


_LINE_KERNEL = r"""
namespace raw_kernel {{
{code}
}}

extern "C" __global__ void gpufilt_generic_filter1d(double* lines, double* results, long long n, long long in_length,
                                                    long long out_length) {{
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)blockDim.x * gridDim.x)
    raw_kernel::{name}(lines + i * in_length, in_length, results + i * out_length, out_length);
}}
"""


def _cupy_line_kernel(function):
    def build():
        cupy = _cupy()
        source = _LINE_KERNEL.format(code=function.code.replace("__global__", "__device__"), name=function.name)
        module = cupy.RawModule(code=source, options=tuple(function.options))
        return module.get_function("gpufilt_generic_filter1d")
    return _memoised(function, ("line",), build)


# ------------------------------------------------------------ numba kernels

def _numba_launch(kernel, launch, n, *args):
    """kernel(*args) on the call's device and stream. Arrays go as numba
    views made without numba's synchronisation on their producer's stream
    (sync=False): every step is on the one stream already."""
    from numba import cuda
    with cuda.gpus[launch.src.device_id]:
        numba_stream = cuda.external_stream(launch.stream_ptr) if launch.stream_ptr else cuda.default_stream()
        args = [cuda.as_cuda_array(a, sync=False) if hasattr(a, "__cuda_array_interface__") else a for a in args]
        blocks = max(1, min(math.ceil(n / _THREADS), 65535 * 16))
        # numba warns of low occupancy when a small array needs few blocks:
        # the caller's data sets the grid, there is nothing to act on (on the
        # H200 every small test array raised it).
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*under-utilization due to low occupancy")
            kernel[blocks, _THREADS, numba_stream](*args)


def _numba_window_kernel(function, coords, ndim, extra_arguments, launch, padded, results, shape, pstrides):
    ndim = max(ndim, 1)
    taps = len(coords)
    cells = tuple(coords.reshape(-1).tolist()) or (0,)
    key = ("numba-window", ndim, cells, taps, len(extra_arguments))

    def build():
        from numba import cuda, float64
        extra = "".join(f", e{k}" for k in range(len(extra_arguments)))
        source = f"""
def kernel(padded, results, n, shape, pstride{extra}):
    values = cuda.local.array({max(taps, 1)}, float64)
    i = cuda.grid(1)
    while i < n:
        rest = i
        base = 0
        for d in range({ndim} - 1, -1, -1):
            base += (rest % shape[d]) * pstride[d]
            rest //= shape[d]
        for t in range({taps}):
            offset = base
            for d in range({ndim}):
                offset += CELLS[t * {ndim} + d] * pstride[d]
            values[t] = padded[offset]
        results[i] = function(values[:{taps}]{extra})
        i += cuda.gridsize(1)
"""
        scope = {"cuda": cuda, "float64": float64, "CELLS": cells, "function": function}
        exec(compile(source, "<gpufilt generic_filter kernel>", "exec"), scope)
        return cuda.jit(scope["kernel"])
    kernel = _memoised(function, key, build)
    n = results.size
    _numba_launch(kernel, launch, n, padded, results, np.int64(n), tuple(map(int, shape)),
                  tuple(map(int, pstrides)), *extra_arguments)


def _numba_line_kernel(function, extra_arguments, launch, lines, results):
    key = ("numba-line", len(extra_arguments))

    def build():
        from numba import cuda
        extra = "".join(f", e{k}" for k in range(len(extra_arguments)))
        source = f"""
def kernel(lines, results, n{extra}):
    i = cuda.grid(1)
    while i < n:
        function(lines[i], results[i]{extra})
        i += cuda.gridsize(1)
"""
        scope = {"cuda": cuda, "function": function}
        exec(compile(source, "<gpufilt generic_filter1d kernel>", "exec"), scope)
        return cuda.jit(scope["kernel"])
    kernel = _memoised(function, key, build)
    n = results.shape[0]
    _numba_launch(kernel, launch, n, lines, results, np.int64(n), *extra_arguments)

