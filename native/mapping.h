#pragma once
#include "common.h"
#include <atomic>

namespace tp {

// See NOTE [Mapping lifetime] in mapping.cc.
struct Mapping {
  void* addr;
  size_t size;
  std::atomic<int64_t> refs;  // holders of the memory: the JS handle until unmap(), and every buffer
  std::atomic<int> lives;     // holders of this struct: the External object, and the memory while mapped
  bool handleDropped;         // touched on the owning JS thread only
  std::atomic<bool> pinned{false};  // registered with the CUDA driver (cuda.cc): unregistered before munmap
};

// Set by cuda.cc when it first pins a mapping: unregisters [addr, addr+size) from the driver.
extern void (*g_unpinHook)(void* addr, size_t size);
// Unregisters a pinned mapping (before it is unmapped or evicted); a no-op otherwise.
void MappingUnpin(Mapping* m);

void MappingRetain(Mapping* m);
void MappingRelease(Mapping* m);
// Resolves a mapping argument, or throws and returns nullptr.
Mapping* ArgMapping(const Napi::CallbackInfo& info, size_t i);

}  // namespace tp
