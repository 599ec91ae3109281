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

// The bytes of a typed array, whatever its buffer (a SharedArrayBuffer too, which
// Napi::ArrayBuffer cannot read), or nullptr.
uint8_t* BytesOf(Napi::Env env, Napi::Value v, size_t* bytes) {
  void* data = nullptr;
  if (!v.IsTypedArray() || napi_get_typedarray_info(env, v, nullptr, nullptr, &data, nullptr, nullptr) != napi_ok) return nullptr;
  *bytes = v.As<Napi::TypedArray>().ByteLength();
  return static_cast<uint8_t*>(data);
}

// streamFill(typedArray, pattern: 16-byte Uint8Array): fills all of typedArray's bytes.
Napi::Value StreamFill(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  // Misuse of this internal function is a no-op, never a crash (TypeScript checked the values).
  if (info.Length() < 2) return env.Undefined();
  size_t n = 0, patBytes = 0;
  uint8_t* target = BytesOf(env, info[0], &n);
  uint8_t* pattern = BytesOf(env, info[1], &patBytes);
  if (target == nullptr || pattern == nullptr || patBytes != 16) return env.Undefined();
  uint8_t pat[16];
  std::memcpy(pat, pattern, 16);
  Fill(target, n, pat);
  return env.Undefined();
}

}  // namespace

void InitFill(Napi::Env env, Napi::Object exports) {
  exports.Set("streamFill", Napi::Function::New(env, StreamFill));
}

}  // namespace tp
