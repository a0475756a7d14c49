// The matmul plan (row-major arrays -> one column-major GEMM) and the CPU
// BLAS: found at run time among the libraries already loaded (numpy's own),
// called through function pointers. See blas.hpp.
#include "core/blas.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <utility>

#if !defined(_WIN32)
#include <dlfcn.h>
#if defined(__APPLE__)
#include <mach-o/dyld.h>
#else
#include <link.h>
#endif
#endif

namespace gpufilt {
namespace {

// ------------------------------------------------------------------ shapes

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

std::vector<int64_t> shape_of(const ArrayDesc& d) { return {d.shape, d.shape + d.ndim}; }

void require_matrix_stack(const std::vector<int64_t>& s, const char* name) {
  if (s.size() != 2 && s.size() != 3)
    throw std::invalid_argument(std::string("matmul: ") + name + " has shape " + shape_text(s) +
                                "; matmul takes 2-D matrices or 3-D stacks of matrices");
}

// Rows and columns of op(x): the last two axes, swapped when transposed.
std::pair<int64_t, int64_t> op_extents(const std::vector<int64_t>& s, bool trans) {
  int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  return trans ? std::make_pair(cols, rows) : std::make_pair(rows, cols);
}

std::string operand_text(const char* name, const std::vector<int64_t>& s, bool trans) {
  return std::string(name) + " has shape " + shape_text(s) + (trans ? " (transposed)" : "");
}

// ------------------------------------------------------------------ layout

// A matrix (or stack) after the caller's transpose: rows x cols with element
// strides rs, cs, and a batch of them `batch_stride` elements apart.
struct Matrix {
  char* data;
  int64_t batch, rows, cols, batch_stride, rs, cs;
};

Matrix matrix_of(const ArrayDesc& d, bool trans) {
  const int64_t item = itemsize(d.dtype);
  const int r = d.ndim - 2, c = d.ndim - 1;
  Matrix x{d.data, 1, d.shape[r], d.shape[c], 0, d.strides[r] / item, d.strides[c] / item};
  if (d.ndim == 3) {
    x.batch = d.shape[0];
    x.batch_stride = d.strides[0] / item;
  }
  if (trans) {
    std::swap(x.rows, x.cols);
    std::swap(x.rs, x.cs);
  }
  return x;
}

[[noreturn]] void not_blas_addressable(const ArrayDesc& d, const char* name) {
  std::string strides = "(";
  for (int i = 0; i < d.ndim; ++i) strides += (i ? ", " : "") + std::to_string(d.strides[i]);
  throw std::invalid_argument(
      std::string("matmul: ") + name + " has shape " + shape_text(shape_of(d)) + " and byte strides " + strides +
      (d.ndim == 1 ? ",)" : ")") +
      ", which BLAS cannot address: one of its last two axes must have a unit stride and the other a "
      "positive stride of at least that axis's extent (C- or Fortran-ordered matrices, their transposes "
      "and slices of whole rows or columns qualify). gpufilt does not copy silently: pass a contiguous "
      "copy (e.g. numpy.ascontiguousarray / cupy.ascontiguousarray / tensor.contiguous()).");
}

// The column-major operand that reads x^T: x's unit-stride axis becomes the
// stored columns (no transpose), or, for an F-ordered x, BLAS transposes.
// Axes of extent 1 place no constraint on their stride.
GemmOperand transposed_operand(const Matrix& x, const ArrayDesc& d, const char* name) {
  const int64_t r = x.rows, c = x.cols;
  GemmOperand op;
  op.data = x.data;
  op.batch_stride = x.batch_stride;
  if ((c <= 1 || x.cs == 1) && (r <= 1 || x.rs >= std::max<int64_t>(1, c))) {
    op.trans = false;  // x^T stored column-major (c x r), columns x.rs apart
    op.ld = r <= 1 ? std::max<int64_t>(1, c) : x.rs;
  } else if ((r <= 1 || x.rs == 1) && (c <= 1 || x.cs >= std::max<int64_t>(1, r))) {
    op.trans = true;  // x stored column-major (r x c), BLAS transposes it
    op.ld = c <= 1 ? std::max<int64_t>(1, r) : x.cs;
  } else {
    not_blas_addressable(d, name);
  }
  return op;
}

GemmOperand flipped(GemmOperand op) {
  op.trans = !op.trans;
  return op;
}

}  // namespace

std::vector<int64_t> matmul_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                  bool trans_a, bool trans_b) {
  require_matrix_stack(a, "a");
  require_matrix_stack(b, "b");
  auto [m, ka] = op_extents(a, trans_a);
  auto [kb, n] = op_extents(b, trans_b);
  if (ka != kb)
    throw std::invalid_argument("matmul: inner dimensions differ: " + operand_text("a", a, trans_a) + " and " +
                                operand_text("b", b, trans_b) + ", so op(a) has " + std::to_string(ka) +
                                " columns but op(b) has " + std::to_string(kb) + " rows");
  if (a.size() == 2 && b.size() == 2) return {m, n};
  const int64_t ba = a.size() == 3 ? a[0] : 1, bb = b.size() == 3 ? b[0] : 1;
  if (ba != bb && ba != 1 && bb != 1)
    throw std::invalid_argument("matmul: batch sizes differ: a has shape " + shape_text(a) + " and b has shape " +
                                shape_text(b) + "; batches must be equal, or one of them 1 (or 2-D) to broadcast");
  return {ba == 1 ? bb : ba, m, n};
}

GemmPlan plan_matmul(const ArrayDesc& a, const ArrayDesc& b, const ArrayDesc& out, bool trans_a,
                     bool trans_b) {
  const std::vector<int64_t> expected = matmul_shape(shape_of(a), shape_of(b), trans_a, trans_b);
  if (shape_of(out) != expected)
    throw std::invalid_argument("matmul: out has shape " + shape_text(shape_of(out)) + " but the product of a " +
                                shape_text(shape_of(a)) + " and b " + shape_text(shape_of(b)) + " has shape " +
                                shape_text(expected));
  Matrix A = matrix_of(a, trans_a), B = matrix_of(b, trans_b), C = matrix_of(out, false);
  GemmPlan p;
  p.dtype = out.dtype;
  p.batch = C.batch;
  p.k = A.cols;
  if (A.batch == 1) A.batch_stride = 0;  // one matrix broadcast over the batch
  if (B.batch == 1) B.batch_stride = 0;
  if (p.batch == 0 || C.rows == 0 || C.cols == 0) return p;  // nothing to write

  // C^T = op(b)^T op(a)^T when out has unit-stride rows (C order); else out is
  // column-major already and C = op(a) op(b).
  const GemmOperand c = transposed_operand(C, out, "out");
  p.c = C.data;
  p.ldc = c.ld;
  p.c_batch_stride = p.batch > 1 ? C.batch_stride : 0;
  if (!c.trans) {
    p.m = C.cols;
    p.n = C.rows;
  } else {
    p.m = C.rows;
    p.n = C.cols;
  }
  if (p.batch > 1 && std::abs(p.c_batch_stride) < p.ldc * (p.n - 1) + p.m)
    throw std::invalid_argument("matmul: the matrices of out overlap one another (batch stride " +
                                std::to_string(out.strides[0]) + " bytes); pass an out with distinct matrices");
  if (p.k == 0) return p;  // a and b are not read: out is zero-filled
  if (!c.trans) {
    p.a = transposed_operand(B, b, "b");
    p.b = transposed_operand(A, a, "a");
  } else {
    p.a = flipped(transposed_operand(A, a, "a"));
    p.b = flipped(transposed_operand(B, b, "b"));
  }
  return p;
}

// ------------------------------------------------------------ CPU BLAS

namespace {

// CBLAS enum values (cblas.h): order, transpose.
constexpr int kCblasColMajor = 102, kCblasNoTrans = 111, kCblasTrans = 112;

// Symbol sets of the CBLAS builds numpy and scipy ship, in order of preference.
struct GemmSymbols {
  const char *sgemm, *dgemm;
  int int_bits;
};
constexpr GemmSymbols kKnownGemms[] = {
    {"scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_", 64},  // numpy >= 2 wheels: scipy-openblas64
    {"scipy_cblas_sgemm", "scipy_cblas_dgemm", 32},        // scipy wheels, gpufilt[blas]: scipy-openblas32
    {"cblas_sgemm64_", "cblas_dgemm64_", 64},              // numpy 1.22-1.26 wheels: openblas64_
    {"cblas_sgemm", "cblas_dgemm", 32},                    // distro / conda numpy: system CBLAS (LP64)
};

struct LoadedBlas {
  BlasLibrary info;
  void *sgemm = nullptr, *dgemm = nullptr;
};

std::mutex g_load_mutex;
std::atomic<const LoadedBlas*> g_blas{nullptr};

std::string known_symbols() {
  std::string s;
  for (const GemmSymbols& g : kKnownGemms) s += (s.empty() ? "" : ", ") + std::string(g.sgemm);
  return s;
}

#if !defined(_WIN32)

// Paths of the shared objects loaded in this process.
std::vector<std::string> loaded_objects() {
  std::vector<std::string> names;
#if defined(__APPLE__)
  for (uint32_t i = 0; i < _dyld_image_count(); ++i) names.emplace_back(_dyld_get_image_name(i));
#else
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && *info->dlpi_name) static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name);
        return 0;
      },
      &names);
#endif
  return names;
}

// An unsuffixed cblas_sgemm may still take 64-bit integers (OpenBLAS built
// with INTERFACE64 and no symbol suffix): OpenBLAS says so in its config.
int integer_bits(void* handle, const GemmSymbols& g) {
  if (g.int_bits == 64) return 64;
  using Config = const char* (*)();
  auto config = reinterpret_cast<Config>(dlsym(handle, "openblas_get_config"));
  return config && std::strstr(config(), "USE64BITINT") ? 64 : 32;
}

// Looks for a known gemm pair in `path` (already loaded, or loaded now when
// `load`); the library stays loaded for the life of the process if found.
const LoadedBlas* find_in(const std::string& path, bool load, const GemmSymbols& g) {
  void* handle = dlopen(path.c_str(), load ? RTLD_NOW | RTLD_LOCAL : RTLD_NOLOAD | RTLD_LAZY);
  if (!handle) return nullptr;
  void* sgemm = dlsym(handle, g.sgemm);
  void* dgemm = dlsym(handle, g.dgemm);
  if (!sgemm || !dgemm) {
    dlclose(handle);
    return nullptr;
  }
  // dlsym also searches the object's dependencies: name the library that
  // actually holds the symbol (numpy's BLAS, not _multiarray_umath).
  Dl_info where{};
  std::string file = dladdr(sgemm, &where) && where.dli_fname ? where.dli_fname : path;
  void* owner = dlopen(file.c_str(), RTLD_NOLOAD | RTLD_LAZY);
  const int bits = integer_bits(owner ? owner : handle, g);
  if (owner) dlclose(owner);
  return new LoadedBlas{{file, g.sgemm, bits}, sgemm, dgemm};  // kept for the process's lifetime
}

#endif

const LoadedBlas* find_blas(const std::vector<std::string>& candidates) {
#if defined(_WIN32)
  (void)candidates;
  return nullptr;
#else
  const std::vector<std::string> loaded = loaded_objects();
  for (const GemmSymbols& g : kKnownGemms)
    for (const std::string& path : loaded)
      if (const LoadedBlas* b = find_in(path, false, g)) return b;
  for (const std::string& path : candidates)
    for (const GemmSymbols& g : kKnownGemms)
      if (const LoadedBlas* b = find_in(path, true, g)) return b;
  return nullptr;
#endif
}

template <class Int>
Int blas_int(int64_t v) {
  if (v > static_cast<int64_t>(std::numeric_limits<Int>::max()))
    throw std::invalid_argument("matmul: a dimension of " + std::to_string(v) +
                                " elements exceeds the 32-bit integers of this BLAS; use an ILP64 BLAS "
                                "(numpy's own scipy-openblas64) or smaller matrices");
  return static_cast<Int>(v);
}

template <class Int, class T>
void gemm_batch(void* fn, const GemmPlan& p) {
  using Gemm = void (*)(int, int, int, Int, Int, Int, T, const T*, Int, const T*, Int, T, T*, Int);
  auto gemm = reinterpret_cast<Gemm>(fn);
  const Int m = blas_int<Int>(p.m), n = blas_int<Int>(p.n), k = blas_int<Int>(p.k);
  const Int lda = blas_int<Int>(p.a.ld), ldb = blas_int<Int>(p.b.ld), ldc = blas_int<Int>(p.ldc);
  const T* a = reinterpret_cast<const T*>(p.a.data);
  const T* b = reinterpret_cast<const T*>(p.b.data);
  T* c = reinterpret_cast<T*>(p.c);
  for (int64_t i = 0; i < p.batch; ++i)
    gemm(kCblasColMajor, p.a.trans ? kCblasTrans : kCblasNoTrans, p.b.trans ? kCblasTrans : kCblasNoTrans, m, n,
         k, T(1), a + i * p.a.batch_stride, lda, b + i * p.b.batch_stride, ldb, T(0), c + i * p.c_batch_stride,
         ldc);
}

// out = 0 when the inner dimension is empty; BLAS is not asked (k = 0 is an
// edge its implementations treat unevenly).
void zero_fill(const GemmPlan& p) {
  const int64_t item = itemsize(p.dtype);
  for (int64_t i = 0; i < p.batch; ++i)
    for (int64_t j = 0; j < p.n; ++j)
      std::memset(p.c + (i * p.c_batch_stride + j * p.ldc) * item, 0, static_cast<size_t>(p.m * item));
}

}  // namespace

BlasLibrary load_blas(const std::vector<std::string>& candidates) {
  std::lock_guard<std::mutex> lock(g_load_mutex);
  if (const LoadedBlas* b = g_blas.load()) return b->info;
  const LoadedBlas* found = find_blas(candidates);
  if (!found) {
    std::string tried;
    for (const std::string& c : candidates) tried += (tried.empty() ? "" : ", ") + c;
    throw std::runtime_error(
        "gpufilt.ops.matmul on the CPU needs a CBLAS library and found none: looked for " + known_symbols() +
        " in the libraries loaded in this process (numpy's own BLAS)" +
        (tried.empty() ? std::string() : " and in " + tried) +
        ". numpy's wheels bundle one (scipy-openblas64); for a numpy built without CBLAS, "
        "pip install 'gpufilt[blas]' (the scipy-openblas32 wheel).");
  }
  g_blas.store(found);
  return found->info;
}

void cpu_gemm(const GemmPlan& p) {
  if (p.batch == 0 || p.m == 0 || p.n == 0) return;
  if (p.k == 0) return zero_fill(p);
  const LoadedBlas* blas = g_blas.load();
  if (!blas) throw std::runtime_error("internal: cpu_gemm before load_blas");
  const bool wide = blas->info.int_bits == 64;
  switch (p.dtype) {
    case DType::Float32:
      return wide ? gemm_batch<int64_t, float>(blas->sgemm, p) : gemm_batch<int32_t, float>(blas->sgemm, p);
    case DType::Float64:
      return wide ? gemm_batch<int64_t, double>(blas->dgemm, p) : gemm_batch<int32_t, double>(blas->dgemm, p);
    default:
      throw std::invalid_argument(std::string("matmul on the CPU takes float32 or float64, not ") +
                                  dtype_name(p.dtype));
  }
}

}  // namespace gpufilt
