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
};

void MappingRetain(Mapping* m);
void MappingRelease(Mapping* m);
// Resolves a mapping argument, or throws and returns nullptr.
Mapping* ArgMapping(const Napi::CallbackInfo& info, size_t i);

}  // namespace tp
