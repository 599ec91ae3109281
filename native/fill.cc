// streamFill: fills memory with a repeating 16-byte pattern using non-temporal (streaming)
// stores, which write whole cache lines to memory without first reading them in and without
// evicting the cache. For a buffer larger than the last-level cache that is up to twice the
// bandwidth of ordinary stores (the read-for-ownership of every line is gone); for one that
// fits, ordinary stores into a hot cache are faster. Which to use is policy: src/tensor.
#include "common.h"
#include <cstdint>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tp {
namespace {

// The pattern byte for address a is pat[a % 16]: callers pass a pattern that repeats every
// element (1, 2, 4 or 8 bytes, all dividing 16) and memory that starts on an element
// boundary, so the phase of an address within the pattern is a function of the address alone.
void Fill(uint8_t* p, size_t n, const uint8_t pat[16]) {
  uint8_t* end = p + n;
  while (p < end && (reinterpret_cast<uintptr_t>(p) & 15) != 0) {
    *p = pat[reinterpret_cast<uintptr_t>(p) & 15];
    ++p;
  }
#if defined(__SSE2__)
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pat));
  for (; p + 64 <= end; p += 64) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), v);
    _mm_stream_si128(reinterpret_cast<__m128i*>(p + 16), v);
    _mm_stream_si128(reinterpret_cast<__m128i*>(p + 32), v);
    _mm_stream_si128(reinterpret_cast<__m128i*>(p + 48), v);
  }
  for (; p + 16 <= end; p += 16) _mm_stream_si128(reinterpret_cast<__m128i*>(p), v);
  _mm_sfence();  // streaming stores are weakly ordered: make them visible before we return
#else
  for (; p + 16 <= end; p += 16) std::memcpy(p, pat, 16);
#endif
  for (; p < end; ++p) *p = pat[reinterpret_cast<uintptr_t>(p) & 15];
}

// streamFill(typedArray, pattern: Uint8Array of 16 bytes): fills all of typedArray's bytes.
Napi::Value StreamFill(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsTypedArray() || !info[1].IsTypedArray()) return env.Undefined();
  napi_typedarray_type type;
  size_t length;
  void* data;
  napi_value ab;
  size_t offset;
  if (napi_get_typedarray_info(env, info[0], &type, &length, &data, &ab, &offset) != napi_ok || data == nullptr) {
    return env.Undefined();
  }
  Napi::TypedArray target = info[0].As<Napi::TypedArray>();
  Napi::TypedArray pattern = info[1].As<Napi::TypedArray>();
  if (pattern.ByteLength() != 16) return env.Undefined();
  uint8_t pat[16];
  std::memcpy(pat, static_cast<uint8_t*>(pattern.ArrayBuffer().Data()) + pattern.ByteOffset(), 16);
  Fill(static_cast<uint8_t*>(data), target.ByteLength(), pat);
  return env.Undefined();
}

}  // namespace

void InitFill(Napi::Env env, Napi::Object exports) {
  exports.Set("streamFill", Napi::Function::New(env, StreamFill));
}

}  // namespace tp
