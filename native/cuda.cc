// CUDA driver primitives, reached at run time only. Nothing here is linked against CUDA and
// no CUDA header is needed to build: the addon builds and loads the same on a machine
// without a GPU, and every policy (caches, reference slots, errors users see) lives in
// TypeScript (src/cuda/).
//
// NOTE [Reaching the driver]
// The driver is `dlopen("libcuda.so.1")` on first use (never at addon load: a process that
// touches no CUDA tensor pays nothing), or the library TENSORPROC_CUDA_LIBRARY names (the
// tests' stand-in, test/cuda/fixtures/fakecuda.c). Entry points are looked up with dlsym by
// their explicit ABI names (cuMemGetInfo_v2, cuMemcpyHtoD_v2...: cuda.h maps the public names
// onto these with macros), not through cuGetProcAddress, whose signature changed in 12.0 and
// which a stand-in would have to implement too; either is what NVIDIA supports. The types
// below are ours, laid out as cuda.h 13.0 lays them out (checked against it in the research
// brief, docs/cuda.md). A missing symbol means a driver too old for the virtual-memory
// route: the reason names it, and CUDA is then unavailable, never half-available.
// Contexts: every call sets the device's primary context current on the calling thread
// first (the one the runtime API and other libraries use), since the current context is per
// thread and our calls come from the JS thread, worker threads and V8's deleter threads.
#include "common.h"
#include "mapping.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace tp {
namespace {

typedef int CUresult;
typedef int CUdevice;
typedef void* CUcontext;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
struct CUmemLocation { int type; int id; };
struct CUmemAllocationProp {
  int type;                  // CUmemAllocationType: 1 = PINNED
  int requestedHandleTypes;  // CUmemAllocationHandleType: 1 = POSIX_FILE_DESCRIPTOR
  CUmemLocation location;    // type 1 = DEVICE
  void* win32HandleMetaData;
  struct { unsigned char compressionType, gpuDirectRDMACapable; unsigned short usage; unsigned char reserved[4]; } allocFlags;
};
struct CUmemAccessDesc { CUmemLocation location; int flags; };  // flags 3 = READWRITE
struct CUuuid { char bytes[16]; };
static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp layout");
static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc layout");

enum { POSIX_FD = 1, LOC_DEVICE = 1, ALLOC_PINNED = 1, PROT_RW = 3, GRAN_MIN = 0, HOSTREG_PORTABLE = 1 };
enum { ATTR_COMPUTE_MODE = 20, ATTR_VMM = 102, ATTR_POSIX_FD = 103 };

#define CU_FUNCS(X)                                                                              \
  X(cuInit, (unsigned))                                                                          \
  X(cuDriverGetVersion, (int*))                                                                  \
  X(cuDeviceGetCount, (int*))                                                                    \
  X(cuDeviceGet, (CUdevice*, int))                                                               \
  X(cuDeviceGetName, (char*, int, CUdevice))                                                     \
  X(cuDeviceGetAttribute, (int*, int, CUdevice))                                                 \
  X(cuDeviceGetUuid_v2, (CUuuid*, CUdevice))                                                     \
  X(cuDeviceTotalMem_v2, (size_t*, CUdevice))                                                    \
  X(cuDevicePrimaryCtxRetain, (CUcontext*, CUdevice))                                            \
  X(cuCtxSetCurrent, (CUcontext))                                                                \
  X(cuCtxSynchronize, (void))                                                                    \
  X(cuGetErrorName, (CUresult, const char**))                                                    \
  X(cuGetErrorString, (CUresult, const char**))                                                  \
  X(cuMemGetInfo_v2, (size_t*, size_t*))                                                         \
  X(cuMemGetAllocationGranularity, (size_t*, const CUmemAllocationProp*, int))                   \
  X(cuMemCreate, (CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long)) \
  X(cuMemRelease, (CUmemGenericAllocationHandle))                                                \
  X(cuMemAddressReserve, (CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long))        \
  X(cuMemAddressFree, (CUdeviceptr, size_t))                                                     \
  X(cuMemMap, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long))   \
  X(cuMemUnmap, (CUdeviceptr, size_t))                                                           \
  X(cuMemSetAccess, (CUdeviceptr, size_t, const CUmemAccessDesc*, size_t))                       \
  X(cuMemExportToShareableHandle, (void*, CUmemGenericAllocationHandle, int, unsigned long long)) \
  X(cuMemImportFromShareableHandle, (CUmemGenericAllocationHandle*, void*, int))                 \
  X(cuMemcpyHtoD_v2, (CUdeviceptr, const void*, size_t))                                         \
  X(cuMemcpyDtoH_v2, (void*, CUdeviceptr, size_t))                                               \
  X(cuMemcpyDtoD_v2, (CUdeviceptr, CUdeviceptr, size_t))                                         \
  X(cuMemsetD8_v2, (CUdeviceptr, unsigned char, size_t))                                         \
  X(cuMemsetD16_v2, (CUdeviceptr, unsigned short, size_t))                                       \
  X(cuMemsetD32_v2, (CUdeviceptr, unsigned, size_t))                                             \
  X(cuMemsetD2D32_v2, (CUdeviceptr, size_t, unsigned, size_t, size_t))                           \
  X(cuMemHostRegister_v2, (void*, size_t, unsigned))                                             \
  X(cuMemHostUnregister, (void*))

#define DECLARE(name, args) CUresult(*name) args = nullptr;
CU_FUNCS(DECLARE)
#undef DECLARE

std::mutex g_load;
bool g_tried = false;
bool g_ok = false;
std::string g_reason;
int g_driverVersion = 0;
int g_devices = 0;
std::string g_libPath;
std::vector<CUcontext> g_ctx;  // primary contexts, retained on first use
std::mutex g_ctxLock;
std::atomic<int64_t> g_pinnedBytes{0}, g_pinnedRanges{0}, g_chunks{0};

std::string ErrName(CUresult r) {
  const char* s = nullptr;
  if (cuGetErrorName && cuGetErrorName(r, &s) == 0 && s) return s;
  return "CUDA_ERROR_" + std::to_string(r);
}

// A JS Error with `code` (the CUresult's name, e.g. CUDA_ERROR_OUT_OF_MEMORY), `cuResult`
// and `call`; src/cuda/errors.ts turns it into the coded classes.
void ThrowCu(Napi::Env env, CUresult r, const char* call) {
  std::string name = ErrName(r);
  const char* text = nullptr;
  if (cuGetErrorString) cuGetErrorString(r, &text);
  std::string msg = std::string(call) + " failed: " + name + (text ? std::string(" (") + text + ")" : "");
  Napi::Error e = Napi::Error::New(env, msg);
  e.Set("code", Napi::String::New(env, name));
  e.Set("cuResult", Napi::Number::New(env, r));
  e.Set("call", Napi::String::New(env, call));
  e.ThrowAsJavaScriptException();
}

#define CU(env, call, ret)                         \
  do {                                             \
    CUresult r_ = (call);                          \
    if (r_ != 0) { ThrowCu(env, r_, #call); return ret; } \
  } while (0)

// Loads the driver once per process; the result (and its reason) is kept.
void Load(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_load);
  if (g_tried) return;
  g_tried = true;
  g_libPath = path.empty() ? "libcuda.so.1" : path;
  void* lib = dlopen(g_libPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    g_reason = std::string("no NVIDIA driver (dlopen: ") + (err ? err : g_libPath) + ")";
    return;
  }
#define LOOKUP(name, args)                                                     \
  *reinterpret_cast<void**>(&name) = dlsym(lib, #name);                        \
  if (!name) {                                                                 \
    g_reason = "driver too old (" + g_libPath + " has no " #name ")";          \
    return;                                                                    \
  }
  CU_FUNCS(LOOKUP)
#undef LOOKUP
  cuDriverGetVersion(&g_driverVersion);
  CUresult r = cuInit(0);
  if (r != 0) {
    g_reason = (r == 100 ? "no CUDA device (cuInit: " : "driver unusable (cuInit: ") + ErrName(r) + ")";
    return;
  }
  r = cuDeviceGetCount(&g_devices);
  if (r != 0 || g_devices <= 0) {
    g_reason = r != 0 ? "driver unusable (cuDeviceGetCount: " + ErrName(r) + ")" : std::string("no CUDA device (the driver reports 0 devices)");
    g_devices = 0;
    return;
  }
  g_ctx.assign(static_cast<size_t>(g_devices), nullptr);
  g_ok = true;
}

// Sets device `dev`'s primary context current on this thread (retaining it the first time).
CUresult Enter(int dev) {
  if (!g_ok || dev < 0 || dev >= g_devices) return 101;  // CUDA_ERROR_INVALID_DEVICE
  CUcontext ctx;
  {
    std::lock_guard<std::mutex> lock(g_ctxLock);
    ctx = g_ctx[static_cast<size_t>(dev)];
    if (ctx == nullptr) {
      CUdevice d;
      CUresult r = cuDeviceGet(&d, dev);
      if (r == 0) r = cuDevicePrimaryCtxRetain(&ctx, d);
      if (r != 0) return r;
      g_ctx[static_cast<size_t>(dev)] = ctx;
    }
  }
  return cuCtxSetCurrent(ctx);
}

bool NeedLoaded(Napi::Env env) {
  if (g_ok) return true;
  Napi::Error e = Napi::Error::New(env, "CUDA is unavailable: " + (g_tried ? g_reason : std::string("not loaded")));
  e.Set("code", Napi::String::New(env, "CUDA_UNAVAILABLE"));
  e.ThrowAsJavaScriptException();
  return false;
}

bool ArgPtr(const Napi::CallbackInfo& info, size_t i, uint64_t* out) {
  if (info.Length() <= i || !info[i].IsBigInt()) {
    Napi::TypeError::New(info.Env(), "tensorproc addon: argument " + std::to_string(i) + " must be a bigint").ThrowAsJavaScriptException();
    return false;
  }
  bool lossless;
  *out = info[i].As<Napi::BigInt>().Uint64Value(&lossless);
  return true;
}

// A host range from (view-like ArrayBuffer or SharedArrayBuffer, byteOffset, length), checked.
bool ArgHost(const Napi::CallbackInfo& info, size_t i, char** out, int64_t n) {
  int64_t off;
  if (!ArgInt(info, i + 1, &off)) return false;
  void* data = nullptr;
  size_t len = 0;
  if (info[i].IsArrayBuffer()) {
    auto ab = info[i].As<Napi::ArrayBuffer>();
    data = ab.Data();
    len = ab.ByteLength();
  } else {
    v8::Local<v8::Value> local = ToV8(info[i]);
    if (!local->IsSharedArrayBuffer()) {
      Napi::TypeError::New(info.Env(), "tensorproc addon: expected an ArrayBuffer").ThrowAsJavaScriptException();
      return false;
    }
    auto sab = local.As<v8::SharedArrayBuffer>();
    data = sab->Data();
    len = sab->ByteLength();
  }
  if (off < 0 || n < 0 || static_cast<uint64_t>(off) > len || static_cast<uint64_t>(n) > len - static_cast<uint64_t>(off)) {
    Napi::RangeError::New(info.Env(), "tensorproc addon: host range outside its buffer").ThrowAsJavaScriptException();
    return false;
  }
  *out = static_cast<char*>(data) + off;
  return true;
}

Napi::BigInt Big(Napi::Env env, uint64_t v) { return Napi::BigInt::New(env, v); }

// cudaLoad(path) -> { ok, reason, driverVersion, devices, library }. Never throws.
Napi::Value CudaLoad(const Napi::CallbackInfo& info) {
  std::string path;
  if (info.Length() > 0 && info[0].IsString()) path = info[0].As<Napi::String>().Utf8Value();
  Load(path);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("ok", Napi::Boolean::New(info.Env(), g_ok));
  o.Set("reason", Napi::String::New(info.Env(), g_reason));
  o.Set("driverVersion", Napi::Number::New(info.Env(), g_driverVersion));
  o.Set("devices", Napi::Number::New(info.Env(), g_devices));
  o.Set("library", Napi::String::New(info.Env(), g_libPath));
  return o;
}

// cudaDevice(index) -> { name, uuid, totalBytes, vmm, posixFd, computeMode, granularity }.
// Asks nothing that needs a context.
Napi::Value CudaDevice(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t i;
  if (!NeedLoaded(env) || !ArgInt(info, 0, &i)) return env.Undefined();
  CUdevice d;
  CU(env, cuDeviceGet(&d, static_cast<int>(i)), env.Undefined());
  char name[256] = {0};
  CU(env, cuDeviceGetName(name, sizeof name - 1, d), env.Undefined());
  CUuuid uuid;
  CU(env, cuDeviceGetUuid_v2(&uuid, d), env.Undefined());
  size_t total = 0;
  CU(env, cuDeviceTotalMem_v2(&total, d), env.Undefined());
  int vmm = 0, fd = 0, mode = 0;
  cuDeviceGetAttribute(&vmm, ATTR_VMM, d);
  cuDeviceGetAttribute(&fd, ATTR_POSIX_FD, d);
  cuDeviceGetAttribute(&mode, ATTR_COMPUTE_MODE, d);
  CUmemAllocationProp prop{};
  prop.type = ALLOC_PINNED;
  prop.requestedHandleTypes = POSIX_FD;
  prop.location = {LOC_DEVICE, static_cast<int>(i)};
  size_t gran = 0;
  if (vmm && fd) CU(env, cuMemGetAllocationGranularity(&gran, &prop, GRAN_MIN), env.Undefined());
  char hex[33];
  for (int k = 0; k < 16; k++) snprintf(hex + 2 * k, 3, "%02x", static_cast<unsigned char>(uuid.bytes[k]));
  Napi::Object o = Napi::Object::New(env);
  o.Set("name", Napi::String::New(env, name));
  o.Set("uuid", Napi::String::New(env, hex));
  o.Set("totalBytes", Napi::Number::New(env, static_cast<double>(total)));
  o.Set("vmm", Napi::Boolean::New(env, vmm != 0));
  o.Set("posixFd", Napi::Boolean::New(env, fd != 0));
  o.Set("computeMode", Napi::Number::New(env, mode));
  o.Set("granularity", Napi::Number::New(env, static_cast<double>(gran)));
  return o;
}

// cudaMemGetInfo(dev) -> [free, total]
Napi::Value CudaMemGetInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t dev;
  if (!NeedLoaded(env) || !ArgInt(info, 0, &dev)) return env.Undefined();
  CU(env, Enter(static_cast<int>(dev)), env.Undefined());
  size_t fr = 0, total = 0;
  CU(env, cuMemGetInfo_v2(&fr, &total), env.Undefined());
  Napi::Array out = Napi::Array::New(env, 2);
  out.Set(0u, Napi::Number::New(env, static_cast<double>(fr)));
  out.Set(1u, Napi::Number::New(env, static_cast<double>(total)));
  return out;
}

// Maps `handle` (bytes long) at a new reservation, readable and writable by device `dev`.
CUresult MapHandle(int dev, CUmemGenericAllocationHandle h, size_t bytes, CUdeviceptr* ptr) {
  CUresult r = cuMemAddressReserve(ptr, bytes, 0, 0, 0);
  if (r != 0) return r;
  r = cuMemMap(*ptr, bytes, 0, h, 0);
  if (r != 0) { cuMemAddressFree(*ptr, bytes); return r; }
  CUmemAccessDesc access{{LOC_DEVICE, dev}, PROT_RW};
  r = cuMemSetAccess(*ptr, bytes, &access, 1);
  if (r != 0) { cuMemUnmap(*ptr, bytes); cuMemAddressFree(*ptr, bytes); }
  return r;
}

Napi::Value Pair(Napi::Env env, uint64_t a, uint64_t b) {
  Napi::Array out = Napi::Array::New(env, 2);
  out.Set(0u, Big(env, a));
  out.Set(1u, Big(env, b));
  return out;
}

// cudaChunkCreate(dev, bytes) -> [handle, ptr]: an exportable allocation (POSIX descriptor
// handles), mapped. `bytes` is a multiple of the granularity (the caller rounds).
Napi::Value CudaChunkCreate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t dev, bytes;
  if (!NeedLoaded(env) || !ArgInt(info, 0, &dev) || !ArgInt(info, 1, &bytes)) return env.Undefined();
  CU(env, Enter(static_cast<int>(dev)), env.Undefined());
  CUmemAllocationProp prop{};
  prop.type = ALLOC_PINNED;
  prop.requestedHandleTypes = POSIX_FD;
  prop.location = {LOC_DEVICE, static_cast<int>(dev)};
  CUmemGenericAllocationHandle h = 0;
  CU(env, cuMemCreate(&h, static_cast<size_t>(bytes), &prop, 0), env.Undefined());
  CUdeviceptr ptr = 0;
  CUresult r = MapHandle(static_cast<int>(dev), h, static_cast<size_t>(bytes), &ptr);
  if (r != 0) { cuMemRelease(h); ThrowCu(env, r, "cuMemMap"); return env.Undefined(); }
  g_chunks.fetch_add(1);
  return Pair(env, h, ptr);
}

// cudaChunkExport(dev, handle) -> a new descriptor (close-on-exec) for the allocation, owned by the caller.
Napi::Value CudaChunkExport(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t dev;
  uint64_t h;
  if (!NeedLoaded(env) || !ArgInt(info, 0, &dev) || !ArgPtr(info, 1, &h)) return env.Undefined();
  CU(env, Enter(static_cast<int>(dev)), env.Undefined());
  int fd = -1;
  CU(env, cuMemExportToShareableHandle(&fd, h, POSIX_FD, 0), env.Undefined());
  // Children we start must not inherit an allocation: set it ourselves, whatever the driver did.
  int flags = fcntl(fd, F_GETFD);
  if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  return Napi::Number::New(env, fd);
}

// cudaChunkImport(dev, fd, bytes) -> [handle, ptr]. The descriptor stays the caller's.
Napi::Value CudaChunkImport(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t dev, fd, bytes;
  if (!NeedLoaded(env) || !ArgInt(info, 0, &dev) || !ArgInt(info, 1, &fd) || !ArgInt(info, 2, &bytes)) return env.Undefined();
  CU(env, Enter(static_cast<int>(dev)), env.Undefined());
  CUmemGenericAllocationHandle h = 0;
  CU(env, cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd)), POSIX_FD), env.Undefined());
  CUdeviceptr ptr = 0;
  CUresult r = MapHandle(static_cast<int>(dev), h, static_cast<size_t>(bytes), &ptr);
  if (r != 0) { cuMemRelease(h); ThrowCu(env, r, "cuMemMap"); return env.Undefined(); }
  g_chunks.fetch_add(1);
  return Pair(env, h, ptr);
}

// cudaChunkDrop(dev, handle, ptr, bytes): waits for the device's queued work (unmapping does
// not: see docs/cuda.md), unmaps, frees the reservation and releases this process's handle.
Napi::Value CudaChunkDrop(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t dev, bytes;
  uint64_t h, ptr;
  if (!NeedLoaded(env) || !ArgInt(info, 0, &dev) || !ArgPtr(info, 1, &h) || !ArgPtr(info, 2, &ptr) || !ArgInt(info, 3, &bytes))
    return env.Undefined();
  CU(env, Enter(static_cast<int>(dev)), env.Undefined());
  CU(env, cuCtxSynchronize(), env.Undefined());
  CU(env, cuMemUnmap(ptr, static_cast<size_t>(bytes)), env.Undefined());
  cuMemAddressFree(ptr, static_cast<size_t>(bytes));
  CU(env, cuMemRelease(h), env.Undefined());
  g_chunks.fetch_sub(1);
  return env.Undefined();
}

// cudaMemset(dev, ptr, count, width, lo, hi): `count` elements of `width` bytes (1, 2, 4, 8)
// set to the pattern (lo: low 32 bits, hi: high 32 bits for width 8). No kernels: an 8-byte
// pattern is two strided 32-bit fills.
Napi::Value CudaMemset(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t dev, count, width, lo, hi;
  uint64_t ptr;
  if (!NeedLoaded(env) || !ArgInt(info, 0, &dev) || !ArgPtr(info, 1, &ptr) || !ArgInt(info, 2, &count) || !ArgInt(info, 3, &width) ||
      !ArgInt(info, 4, &lo) || !ArgInt(info, 5, &hi))
    return env.Undefined();
  CU(env, Enter(static_cast<int>(dev)), env.Undefined());
  size_t n = static_cast<size_t>(count);
  if (n == 0) return env.Undefined();
  switch (width) {
    case 1: CU(env, cuMemsetD8_v2(ptr, static_cast<unsigned char>(lo), n), env.Undefined()); break;
    case 2: CU(env, cuMemsetD16_v2(ptr, static_cast<unsigned short>(lo), n), env.Undefined()); break;
    case 4: CU(env, cuMemsetD32_v2(ptr, static_cast<unsigned>(lo), n), env.Undefined()); break;
    case 8:
      CU(env, cuMemsetD2D32_v2(ptr, 8, static_cast<unsigned>(lo), 1, n), env.Undefined());
      CU(env, cuMemsetD2D32_v2(ptr + 4, 8, static_cast<unsigned>(hi), 1, n), env.Undefined());
      break;
    default: Napi::RangeError::New(env, "tensorproc addon: fill width").ThrowAsJavaScriptException();
  }
  return env.Undefined();
}

// cudaCopyHtoD(dev, dstPtr, hostBuffer, hostOffset, n)
Napi::Value CudaCopyHtoD(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t dev, n;
  uint64_t dst;
  char* host;
  if (!NeedLoaded(env) || !ArgInt(info, 0, &dev) || !ArgPtr(info, 1, &dst) || !ArgInt(info, 4, &n) || !ArgHost(info, 2, &host, n))
    return env.Undefined();
  CU(env, Enter(static_cast<int>(dev)), env.Undefined());
  if (n > 0) CU(env, cuMemcpyHtoD_v2(dst, host, static_cast<size_t>(n)), env.Undefined());
  return env.Undefined();
}

// cudaCopyDtoH(dev, hostBuffer, hostOffset, srcPtr, n)
Napi::Value CudaCopyDtoH(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t dev, n;
  uint64_t src;
  char* host;
  if (!NeedLoaded(env) || !ArgInt(info, 0, &dev) || !ArgPtr(info, 3, &src) || !ArgInt(info, 4, &n) || !ArgHost(info, 1, &host, n))
    return env.Undefined();
  CU(env, Enter(static_cast<int>(dev)), env.Undefined());
  if (n > 0) CU(env, cuMemcpyDtoH_v2(host, src, static_cast<size_t>(n)), env.Undefined());
  return env.Undefined();
}

// cudaCopyDtoD(dev, dstPtr, srcPtr, n)
Napi::Value CudaCopyDtoD(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t dev, n;
  uint64_t dst, src;
  if (!NeedLoaded(env) || !ArgInt(info, 0, &dev) || !ArgPtr(info, 1, &dst) || !ArgPtr(info, 2, &src) || !ArgInt(info, 3, &n))
    return env.Undefined();
  CU(env, Enter(static_cast<int>(dev)), env.Undefined());
  if (n > 0) CU(env, cuMemcpyDtoD_v2(dst, src, static_cast<size_t>(n)), env.Undefined());
  return env.Undefined();
}

// cudaSynchronize(dev): every stream of the primary context, ours and other libraries'.
Napi::Value CudaSynchronize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int64_t dev;
  if (!NeedLoaded(env) || !ArgInt(info, 0, &dev)) return env.Undefined();
  CU(env, Enter(static_cast<int>(dev)), env.Undefined());
  CU(env, cuCtxSynchronize(), env.Undefined());
  return env.Undefined();
}

// The mapping hook (mapping.cc): a registered mapping is unregistered before it is unmapped
// or evicted, on whatever thread that happens.
void Unpin(void* addr, size_t size) {
  if (Enter(0) == 0) cuMemHostUnregister(addr);
  g_pinnedBytes.fetch_sub(static_cast<int64_t>(size));
  g_pinnedRanges.fetch_sub(1);
}

// cudaPin(mapping) -> true when registered now, false when it already was. The whole mapping
// (header included), page-locked in place and kept so while it is mapped.
Napi::Value CudaPin(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!NeedLoaded(env)) return env.Undefined();
  Mapping* m = ArgMapping(info, 0);
  if (!m) return env.Undefined();
  if (m->pinned.load()) return Napi::Boolean::New(env, false);
  CU(env, Enter(0), env.Undefined());
  CU(env, cuMemHostRegister_v2(m->addr, m->size, HOSTREG_PORTABLE), env.Undefined());
  g_pinnedBytes.fetch_add(static_cast<int64_t>(m->size));
  g_pinnedRanges.fetch_add(1);
  g_unpinHook = Unpin;
  m->pinned.store(true);
  return Napi::Boolean::New(env, true);
}

Napi::Value CudaIsPinned(const Napi::CallbackInfo& info) {
  Mapping* m = ArgMapping(info, 0);
  if (!m) return info.Env().Undefined();
  return Napi::Boolean::New(info.Env(), m->pinned.load());
}

// cudaStats() -> { pinnedBytes, pinnedRanges, chunks }: this process's, for doctor and the tests.
Napi::Value CudaStats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("pinnedBytes", Napi::Number::New(env, static_cast<double>(g_pinnedBytes.load())));
  o.Set("pinnedRanges", Napi::Number::New(env, static_cast<double>(g_pinnedRanges.load())));
  o.Set("chunks", Napi::Number::New(env, static_cast<double>(g_chunks.load())));
  return o;
}

}  // namespace

void InitCuda(Napi::Env env, Napi::Object exports) {
  exports.Set("cudaLoad", Napi::Function::New(env, CudaLoad));
  exports.Set("cudaDevice", Napi::Function::New(env, CudaDevice));
  exports.Set("cudaMemGetInfo", Napi::Function::New(env, CudaMemGetInfo));
  exports.Set("cudaChunkCreate", Napi::Function::New(env, CudaChunkCreate));
  exports.Set("cudaChunkExport", Napi::Function::New(env, CudaChunkExport));
  exports.Set("cudaChunkImport", Napi::Function::New(env, CudaChunkImport));
  exports.Set("cudaChunkDrop", Napi::Function::New(env, CudaChunkDrop));
  exports.Set("cudaMemset", Napi::Function::New(env, CudaMemset));
  exports.Set("cudaCopyHtoD", Napi::Function::New(env, CudaCopyHtoD));
  exports.Set("cudaCopyDtoH", Napi::Function::New(env, CudaCopyDtoH));
  exports.Set("cudaCopyDtoD", Napi::Function::New(env, CudaCopyDtoD));
  exports.Set("cudaSynchronize", Napi::Function::New(env, CudaSynchronize));
  exports.Set("cudaPin", Napi::Function::New(env, CudaPin));
  exports.Set("cudaIsPinned", Napi::Function::New(env, CudaIsPinned));
  exports.Set("cudaStats", Napi::Function::New(env, CudaStats));
}

}  // namespace tp
