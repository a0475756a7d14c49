// The DLPack 1.1 structures gpufilt consumes (layout as in dlpack.h).
#pragma once
#include <cstdint>

namespace gpufilt::dlpack {

enum DeviceType : int32_t {
  kCPU = 1, kCUDA = 2, kCUDAHost = 3, kOpenCL = 4, kVulkan = 7, kMetal = 8, kVPI = 9,
  kROCM = 10, kROCMHost = 11, kExtDev = 12, kCUDAManaged = 13, kOneAPI = 14,
};
enum TypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kOpaqueHandle = 3, kBfloat = 4, kComplex = 5, kBool = 6 };

struct Version { uint32_t major, minor; };
struct Device { int32_t device_type, device_id; };
struct DataType { uint8_t code, bits; uint16_t lanes; };

struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL means C-contiguous
  uint64_t byte_offset;
};

struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor*);
};

constexpr uint64_t kFlagReadOnly = 1ull << 0;

struct ManagedTensorVersioned {
  Version version;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned*);
  uint64_t flags;
  Tensor dl_tensor;
};

constexpr uint32_t kMajorVersion = 1;

}  // namespace gpufilt::dlpack
