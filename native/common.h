// Shared helpers for the addon. The addon does primitives only: every check that a user's
// input is sensible, and every policy, lives in TypeScript (src/native and above).
#pragma once
#include <napi.h>
#include <v8.h>
#include <cstring>

namespace tp {

// Throws a JS Error with `errno` (negative, as Node's own system errors), `code` (the errno
// name, e.g. "ENOSPC") and `syscall`. src/native/errors.ts turns these into ERR_TP_* classes.
void ThrowErrno(Napi::Env env, int err, const char* syscall);
// The same error, not thrown (to reject a promise with).
Napi::Error ErrnoError(Napi::Env env, int err, const char* syscall);

// NOTE [Node-API and the V8 API]
// Node-API has no way to create an ArrayBuffer or SharedArrayBuffer over memory it does not
// own with a deleter that runs when every view is gone (napi_create_external_arraybuffer has
// no SharedArrayBuffer form). We build those two objects with the V8 API and hand them back
// as napi_values. In Node a napi_value *is* a v8::Local<v8::Value> reinterpreted (see
// v8impl::JsValueFromV8LocalValue in src/js_native_api_v8.h); this holds for every Node
// release that has Node-API, and we compile against the running Node's headers anyway
// because of the V8 API. Nothing else in the addon uses the V8 API.
inline v8::Local<v8::Value> ToV8(napi_value v) {
  v8::Local<v8::Value> local;
  static_assert(sizeof(local) == sizeof(v), "napi_value and v8::Local differ in size");
  std::memcpy(static_cast<void*>(&local), &v, sizeof(v));
  return local;
}
inline napi_value FromV8(v8::Local<v8::Value> local) { return reinterpret_cast<napi_value>(*local); }

// Argument helpers. They assume TypeScript already validated the values (types and ranges);
// they only guard against crashes from a misuse of the internal API.
bool ArgInt(const Napi::CallbackInfo& info, size_t i, int64_t* out);
bool ArgString(const Napi::CallbackInfo& info, size_t i, std::string* out);

void InitSegment(Napi::Env env, Napi::Object exports);
void InitMapping(Napi::Env env, Napi::Object exports);
void InitFutex(Napi::Env env, Napi::Object exports);
void InitChannel(Napi::Env env, Napi::Object exports);
void InitProcess(Napi::Env env, Napi::Object exports);
void InitPeer(Napi::Env env, Napi::Object exports);
void InitTransport(Napi::Env env, Napi::Object exports);
void InitFill(Napi::Env env, Napi::Object exports);
void InitFileMap(Napi::Env env, Napi::Object exports);
void InitCuda(Napi::Env env, Napi::Object exports);

}  // namespace tp
