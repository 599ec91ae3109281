// Mappings: one mmap of a segment, seen from JS as any number of ArrayBuffers and
// SharedArrayBuffers over parts of it. See NOTE [Node-API and the V8 API] in common.h.
//
// NOTE [Mapping lifetime]
// A Mapping counts its holders: the JS handle (an External, dropped by unmap() or by the
// garbage collector) and every buffer made over it (dropped when V8 frees the buffer's
// backing store: after the last view is collected, or at once when the buffer is detached
// and nothing else holds the store). The memory is unmapped when the count reaches zero, so
// no JS object can ever point at unmapped memory. V8 may run a deleter on any thread, hence
// the atomic count. The struct itself lives until both the External is collected and the
// memory is unmapped (`lives`), so a finalizer running after the unmap finds it intact.
#include "mapping.h"
#include <sys/mman.h>
#include <unistd.h>
#include <cerrno>

namespace tp {

std::atomic<int64_t> g_maps{0}, g_unmaps{0};

void MappingRetain(Mapping* m) { m->refs.fetch_add(1, std::memory_order_relaxed); }
static void StructRelease(Mapping* m) {
  if (m->lives.fetch_sub(1, std::memory_order_acq_rel) == 1) delete m;
}

void (*g_unpinHook)(void* addr, size_t size) = nullptr;

void MappingUnpin(Mapping* m) {
  if (m->pinned.exchange(false) && g_unpinHook != nullptr) g_unpinHook(m->addr, m->size);
}

void MappingRelease(Mapping* m) {
  if (m->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    MappingUnpin(m);  // NOTE [Pinned segments]
    munmap(m->addr, m->size);
    g_unmaps.fetch_add(1, std::memory_order_relaxed);
    StructRelease(m);
  }
}

Mapping* ArgMapping(const Napi::CallbackInfo& info, size_t i) {
  if (info.Length() <= i || !info[i].IsExternal()) {
    Napi::TypeError::New(info.Env(), "tensorproc addon: expected a mapping").ThrowAsJavaScriptException();
    return nullptr;
  }
  Mapping* m = info[i].As<Napi::External<Mapping>>().Data();
  if (m->handleDropped) {
    Napi::Error::New(info.Env(), "tensorproc addon: mapping already unmapped").ThrowAsJavaScriptException();
    return nullptr;
  }
  return m;
}

namespace {

void DropHandle(Mapping* m) {
  if (m->handleDropped) return;
  m->handleDropped = true;
  MappingRelease(m);
}

// map(fd, size) -> External. The descriptor may be closed right after: a mapping outlives it.
Napi::Value Map(const Napi::CallbackInfo& info) {
  int64_t fd, size;
  if (!ArgInt(info, 0, &fd) || !ArgInt(info, 1, &size)) return info.Env().Undefined();
  void* addr = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, static_cast<int>(fd), 0);
  if (addr == MAP_FAILED) { ThrowErrno(info.Env(), errno, "mmap"); return info.Env().Undefined(); }
  g_maps.fetch_add(1, std::memory_order_relaxed);
  Mapping* m = new Mapping{addr, static_cast<size_t>(size), {1}, {2}, false, {false}};
  return Napi::External<Mapping>::New(info.Env(), m, [](Napi::Env, Mapping* mm) {
    DropHandle(mm);
    StructRelease(mm);
  });
}

void BufferDeleter(void*, size_t, void* data) { MappingRelease(static_cast<Mapping*>(data)); }

bool Range(const Napi::CallbackInfo& info, Mapping* m, int64_t* off, int64_t* len) {
  if (!ArgInt(info, 1, off) || !ArgInt(info, 2, len)) return false;
  // Compared without adding offset and length, which could overflow int64.
  if (*off < 0 || *len < 0 || static_cast<uint64_t>(*off) > m->size || static_cast<uint64_t>(*len) > m->size - static_cast<uint64_t>(*off)) {
    Napi::RangeError::New(info.Env(), "tensorproc addon: range outside the mapping").ThrowAsJavaScriptException();
    return false;
  }
  return true;
}

// buffer(mapping, offset, length) -> ArrayBuffer over [offset, offset+length).
Napi::Value Buffer(const Napi::CallbackInfo& info) {
  Mapping* m = ArgMapping(info, 0);
  int64_t off, len;
  if (!m || !Range(info, m, &off, &len)) return info.Env().Undefined();
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  MappingRetain(m);
  auto store = v8::ArrayBuffer::NewBackingStore(static_cast<char*>(m->addr) + off, len, BufferDeleter, m);
  return Napi::Value(info.Env(), FromV8(v8::ArrayBuffer::New(isolate, std::move(store))));
}

// sharedBuffer(mapping, offset, length) -> SharedArrayBuffer over the same bytes: what
// Atomics and worker_threads need.
Napi::Value SharedBuffer(const Napi::CallbackInfo& info) {
  Mapping* m = ArgMapping(info, 0);
  int64_t off, len;
  if (!m || !Range(info, m, &off, &len)) return info.Env().Undefined();
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  MappingRetain(m);
  auto store = v8::SharedArrayBuffer::NewBackingStore(static_cast<char*>(m->addr) + off, len, BufferDeleter, m);
  return Napi::Value(info.Env(), FromV8(v8::SharedArrayBuffer::New(isolate, std::move(store))));
}

// unmap(mapping): drops the handle's hold; buffers still alive keep the memory mapped.
Napi::Value Unmap(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsExternal()) return info.Env().Undefined();
  DropHandle(info[0].As<Napi::External<Mapping>>().Data());
  return info.Env().Undefined();
}

// detach(arrayBuffer): every view over it becomes empty, and its hold on the mapping goes
// with its backing store. This is how release() makes stale views harmless.
Napi::Value Detach(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsArrayBuffer()) return info.Env().Undefined();
  Napi::ArrayBuffer ab = info[0].As<Napi::ArrayBuffer>();
  if (!ab.IsDetached()) ab.Detach();
  return info.Env().Undefined();
}

// evict(mapping, keepBytes, refs) -> whether done. When the mapping has exactly `refs`
// holders (the handle and the buffers over its first keepBytes that the caller keeps: a
// segment's header view), the file stops being mapped here at once, instead of when the
// garbage collector frees those buffers: the first keepBytes become private anonymous
// memory (MAP_FIXED, so the buffers over them stay valid and nothing else can be mapped
// there) and the rest is unmapped. A segment given up (its tensors released, the cache
// emptied) then gives its memory back now: for a memfd or a removed name, the kernel frees
// the pages with the file's last mapping. Called before unmap(), on the owning thread.
Napi::Value Evict(const Napi::CallbackInfo& info) {
  Mapping* m = ArgMapping(info, 0);
  int64_t keep, refs;
  if (!m || !ArgInt(info, 1, &keep) || !ArgInt(info, 2, &refs)) return info.Env().Undefined();
  if (m->refs.load(std::memory_order_acquire) != refs || keep < 0 || static_cast<uint64_t>(keep) > m->size) {
    return Napi::Boolean::New(info.Env(), false);
  }
  // Whole pages (a 4 KiB header on a system of 16 or 64 KiB pages keeps its first page).
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t k = (static_cast<size_t>(keep) + page - 1) / page * page;
  if (k > m->size) k = m->size;
  MappingUnpin(m);  // the range changes under it: NOTE [Pinned segments]
  if (k > 0 && mmap(m->addr, k, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
    return Napi::Boolean::New(info.Env(), false);
  }
  if (m->size > k) munmap(static_cast<char*>(m->addr) + k, m->size - k);
  m->size = k;
  return Napi::Boolean::New(info.Env(), true);
}

// stats() -> [maps, unmaps] since the process started (all threads): lets tests see that a
// recycled segment caused no new mapping.
// mappingRefs(mapping) -> holders of the memory: the handle (until unmap) plus every live
// buffer over it, wherever it lives now (a buffer transferred to another thread keeps its
// backing store, and so its hold). Lets the recycling cache see a buffer that left.
Napi::Value Refs(const Napi::CallbackInfo& info) {
  Mapping* m = ArgMapping(info, 0);
  if (!m) return info.Env().Undefined();
  return Napi::Number::New(info.Env(), static_cast<double>(m->refs.load(std::memory_order_acquire)));
}

Napi::Value Stats(const Napi::CallbackInfo& info) {
  Napi::Array out = Napi::Array::New(info.Env(), 2);
  out.Set(0u, Napi::Number::New(info.Env(), static_cast<double>(g_maps.load())));
  out.Set(1u, Napi::Number::New(info.Env(), static_cast<double>(g_unmaps.load())));
  return out;
}

}  // namespace

void InitMapping(Napi::Env env, Napi::Object exports) {
  exports.Set("map", Napi::Function::New(env, Map));
  exports.Set("buffer", Napi::Function::New(env, Buffer));
  exports.Set("sharedBuffer", Napi::Function::New(env, SharedBuffer));
  exports.Set("unmap", Napi::Function::New(env, Unmap));
  exports.Set("detach", Napi::Function::New(env, Detach));
  exports.Set("evict", Napi::Function::New(env, Evict));
  exports.Set("mappingStats", Napi::Function::New(env, Stats));
  exports.Set("mappingRefs", Napi::Function::New(env, Refs));
}

}  // namespace tp
