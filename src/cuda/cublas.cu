// cuBLAS through dlopen, for matmul. The few entry points used are declared
// here with the ABI of cublas_api.h (identical in CUDA 12 and 13; enum values
// checked against the header), so no cuBLAS header or library is needed to
// build and none is a link-time dependency. Host code only.
#include "cuda/cublas.hpp"

#include <dlfcn.h>
#include <library_types.h>  // cudaDataType: CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F, CUDA_R_64F

#include <atomic>
#include <climits>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "cuda/check.cuh"

namespace gpufilt::cuda {
namespace {

// --- cublas_api.h, as far as matmul needs it (C enums are passed as int) ---
using cublasHandle_t = void*;  // struct cublasContext*
using cublasStatus_t = int;
constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
constexpr int CUBLAS_OP_N = 0, CUBLAS_OP_T = 1;               // cublasOperation_t
constexpr int CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_64F = 70;  // cublasComputeType_t
constexpr int CUBLAS_GEMM_DEFAULT = -1;                        // cublasGemmAlgo_t

using CreateFn = cublasStatus_t (*)(cublasHandle_t*);                 // cublasCreate_v2
using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);  // cublasSetStream_v2
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, int transa, int transb, int m, int n, int k,
                                    const void* alpha, const void* A, cudaDataType Atype, int lda,
                                    const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
                                    cudaDataType Ctype, int ldc, int computeType, int algo);
using GemmStridedBatchedExFn = cublasStatus_t (*)(
    cublasHandle_t, int transa, int transb, int m, int n, int k, const void* alpha, const void* A,
    cudaDataType Atype, int lda, long long strideA, const void* B, cudaDataType Btype, int ldb,
    long long strideB, const void* beta, void* C, cudaDataType Ctype, int ldc, long long strideC,
    int batchCount, int computeType, int algo);
using StatusTextFn = const char* (*)(cublasStatus_t);  // cublasGetStatusName / cublasGetStatusString

constexpr const char* kSoname = "libcublas.so.13";

struct Cublas {
  std::string path;
  CreateFn create;
  SetStreamFn set_stream;
  GemmExFn gemm;
  GemmStridedBatchedExFn gemm_strided_batched;
  StatusTextFn status_name, status_string;  // null in builds that lack them
};

std::mutex g_load_mutex;
std::atomic<const Cublas*> g_cublas{nullptr};

template <class Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

// The entry points of an opened libcublas, or null (and why) when one is missing.
const Cublas* bind(void* lib, std::string& why) {
  auto* c = new Cublas{"",
                       symbol<CreateFn>(lib, "cublasCreate_v2"),
                       symbol<SetStreamFn>(lib, "cublasSetStream_v2"),
                       symbol<GemmExFn>(lib, "cublasGemmEx"),
                       symbol<GemmStridedBatchedExFn>(lib, "cublasGemmStridedBatchedEx"),
                       symbol<StatusTextFn>(lib, "cublasGetStatusName"),
                       symbol<StatusTextFn>(lib, "cublasGetStatusString")};
  if (!c->create || !c->set_stream || !c->gemm || !c->gemm_strided_batched) {
    why = "it lacks cublasCreate_v2, cublasSetStream_v2, cublasGemmEx or cublasGemmStridedBatchedEx";
    delete c;
    return nullptr;
  }
  Dl_info where{};
  c->path = dladdr(reinterpret_cast<void*>(c->create), &where) && where.dli_fname ? where.dli_fname : kSoname;
  return c;  // kept, with the library, for the life of the process
}

const Cublas* open_cublas(const char* file, int flags, std::string& errors) {
  void* lib = dlopen(file, flags);
  if (!lib) {
    if (!(flags & RTLD_NOLOAD)) errors += std::string("\n  ") + dlerror();
    return nullptr;
  }
  std::string why;
  if (const Cublas* c = bind(lib, why)) return c;
  errors += std::string("\n  ") + file + ": " + why;
  dlclose(lib);
  return nullptr;
}

const Cublas& loaded() {
  const Cublas* c = g_cublas.load();
  if (!c) throw std::runtime_error("internal: cublas_gemm before load_cublas");
  return *c;
}

// --- handles -----------------------------------------------------------------

// One handle per device, created on first use (cublasCreate allocates its
// resources then, once) and kept for the process: destroying it at exit can
// race the CUDA context's own teardown. The mutex covers setting the stream
// and enqueueing, since calls from several threads share the handle.
struct DeviceHandle {
  cublasHandle_t handle = nullptr;
  std::mutex mutex;
};

[[noreturn]] void throw_cublas(const Cublas& lib, cublasStatus_t status, const char* call, int line) {
  std::string name = lib.status_name ? lib.status_name(status) : "CUBLAS_STATUS_" + std::to_string(status);
  std::string text = lib.status_string ? lib.status_string(status) : "cuBLAS call failed";
  throw CudaError(status, name, std::string(call) + ": " + text, __FILE__, line);
}

#define GF_CUBLAS_CHECK(lib, expr)                                          \
  do {                                                                      \
    const cublasStatus_t gf_status_ = (expr);                               \
    if (gf_status_ != CUBLAS_STATUS_SUCCESS) throw_cublas(lib, gf_status_, #expr, __LINE__); \
  } while (0)

DeviceHandle& device_handle(const Cublas& lib) {
  int device = 0;
  GF_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::vector<std::unique_ptr<DeviceHandle>> handles;
  std::lock_guard<std::mutex> lock(mutex);
  if (device >= static_cast<int>(handles.size())) handles.resize(device + 1);
  if (!handles[device]) {
    auto h = std::make_unique<DeviceHandle>();
    GF_CUBLAS_CHECK(lib, lib.create(&h->handle));
    // The default math mode stays: float32 without TF32, as cupy and numpy
    // compute it (cupy enables TF32 only under CUPY_TF32=1).
    handles[device] = std::move(h);
  }
  return *handles[device];
}

// --- the call ----------------------------------------------------------------

cudaDataType data_type(DType t) {
  switch (t) {
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    case DType::Float32: return CUDA_R_32F;
    case DType::Float64: return CUDA_R_64F;
    default:
      throw std::invalid_argument(std::string("matmul on CUDA takes float16, bfloat16, float32 or float64, not ") +
                                  dtype_name(t));
  }
}

int cublas_int(int64_t v) {
  if (v > INT_MAX)
    throw std::invalid_argument("matmul: a dimension or leading dimension of " + std::to_string(v) +
                                " elements exceeds cuBLAS's 32-bit sizes");
  return static_cast<int>(v);
}

// out = 0 when the inner dimension is empty (cuBLAS is not asked).
void zero_fill(const GemmPlan& p, cudaStream_t stream) {
  const size_t item = itemsize(p.dtype);
  for (int64_t i = 0; i < p.batch; ++i)
    GF_CUDA_CHECK(cudaMemset2DAsync(p.c + i * p.c_batch_stride * item, p.ldc * item, 0, p.m * item, p.n, stream));
}

}  // namespace

std::string load_cublas(const std::vector<std::string>& candidates) {
  std::lock_guard<std::mutex> lock(g_load_mutex);
  if (const Cublas* c = g_cublas.load()) return c->path;
  std::string errors;
  const Cublas* found = open_cublas(kSoname, RTLD_NOW | RTLD_NOLOAD, errors);  // torch's or cupy's
  for (size_t i = 0; !found && i < candidates.size(); ++i)
    found = open_cublas(candidates[i].c_str(), RTLD_NOW | RTLD_LOCAL, errors);
  if (!found) found = open_cublas(kSoname, RTLD_NOW | RTLD_LOCAL, errors);  // system library path
  if (!found)
    throw std::runtime_error(std::string("gpufilt.ops.matmul on CUDA needs cuBLAS for CUDA 13 (") + kSoname +
                             ") and could not load it:" + errors +
                             "\nInstall it with: pip install nvidia-cublas (the CUDA 13 wheel; "
                             "it lands in site-packages/nvidia/cu13/lib), or install the CUDA 13 toolkit "
                             "and put its lib64 on LD_LIBRARY_PATH.");
  g_cublas.store(found);
  return found->path;
}

void cublas_gemm(const GemmPlan& p, intptr_t stream_value) {
  if (p.batch == 0 || p.m == 0 || p.n == 0) return;
  const cudaStream_t stream = as_stream(stream_value);
  if (p.k == 0) return zero_fill(p, stream);
  const cudaDataType type = data_type(p.dtype);
  const Cublas& lib = loaded();
  // 16-bit types accumulate in float32, as cupy and torch do; scalars have
  // the compute type.
  const bool fp64 = p.dtype == DType::Float64;
  const int compute = fp64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const double one64 = 1.0, zero64 = 0.0;
  const float one32 = 1.0f, zero32 = 0.0f;
  const void* alpha = fp64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = fp64 ? static_cast<const void*>(&zero64) : &zero32;
  const int m = cublas_int(p.m), n = cublas_int(p.n), k = cublas_int(p.k), batch = cublas_int(p.batch);
  const int lda = cublas_int(p.a.ld), ldb = cublas_int(p.b.ld), ldc = cublas_int(p.ldc);
  const int ta = p.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N, tb = p.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;

  DeviceHandle& h = device_handle(lib);
  std::lock_guard<std::mutex> lock(h.mutex);
  GF_CUBLAS_CHECK(lib, lib.set_stream(h.handle, stream));
  // The plain GEMM for one matrix, as cupy.matmul and torch.mm call it; one
  // per matrix when a batch runs backwards (cuBLAS documents no sign for its
  // batch strides).
  const size_t item = itemsize(p.dtype);
  const bool backwards = p.a.batch_stride < 0 || p.b.batch_stride < 0 || p.c_batch_stride < 0;
  if (batch == 1 || backwards)
    for (int64_t i = 0; i < p.batch; ++i)
      GF_CUBLAS_CHECK(lib, lib.gemm(h.handle, ta, tb, m, n, k, alpha, p.a.data + i * p.a.batch_stride * item, type,
                                    lda, p.b.data + i * p.b.batch_stride * item, type, ldb, beta,
                                    p.c + i * p.c_batch_stride * item, type, ldc, compute, CUBLAS_GEMM_DEFAULT));
  else
    GF_CUBLAS_CHECK(lib, lib.gemm_strided_batched(h.handle, ta, tb, m, n, k, alpha, p.a.data, type, lda,
                                                  p.a.batch_stride, p.b.data, type, ldb, p.b.batch_stride, beta,
                                                  p.c, type, ldc, p.c_batch_stride, batch, compute,
                                                  CUBLAS_GEMM_DEFAULT));
}

}  // namespace gpufilt::cuda
