// Primitives for src/transport: a placeholder object that V8's serializer treats as a host
// object, and a readiness check that does not wait. Framing and policy are in TypeScript.
#include "common.h"
#include <poll.h>
#include <cerrno>

namespace tp {
namespace {

// NOTE [Host-object markers]
// v8.Serializer hands an object to `_writeHostObject` only when it is an API object (made
// from a FunctionTemplate); class instances such as Tensor are written as plain objects,
// their class and private fields lost. A Marker is the cheapest API object there is: the
// transport puts one in place of each tensor, queue or event it sends, and writes the
// object's index in the message's table where the Marker is met.
// Node-API classes (napi_define_class) do not qualify: their instances have no internal
// fields, so V8 makes them ordinary objects. This is a V8 FunctionTemplate whose instances
// have one internal field (see NOTE [Node-API and the V8 API] in common.h).
Napi::Value MarkerClass(Napi::Env env) {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  v8::EscapableHandleScope scope(isolate);
  v8::Local<v8::FunctionTemplate> tpl = v8::FunctionTemplate::New(isolate);
  tpl->SetClassName(v8::String::NewFromUtf8Literal(isolate, "Marker"));
  tpl->InstanceTemplate()->SetInternalFieldCount(1);
  v8::Local<v8::Function> fn = tpl->GetFunction(isolate->GetCurrentContext()).ToLocalChecked();
  return Napi::Value(env, FromV8(scope.Escape(fn)));
}

// pollNow(fd, events) -> revents, without waiting. events and revents: 1 readable,
// 2 writable, 4 hang-up/error (as Poll's callback).
Napi::Value PollNow(const Napi::CallbackInfo& info) {
  int64_t fd, events;
  if (!ArgInt(info, 0, &fd) || !ArgInt(info, 1, &events)) return info.Env().Undefined();
  struct pollfd p = {static_cast<int>(fd), 0, 0};
  if (events & 1) p.events |= POLLIN;
  if (events & 2) p.events |= POLLOUT;
  int r;
  do { r = poll(&p, 1, 0); } while (r < 0 && errno == EINTR);
  if (r < 0) {
    ThrowErrno(info.Env(), errno, "poll");
    return info.Env().Undefined();
  }
  int out = 0;
  if (p.revents & POLLIN) out |= 1;
  if (p.revents & POLLOUT) out |= 2;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) out |= 4;
  return Napi::Number::New(info.Env(), out);
}

// arrayKeys(array, indices) -> the array's own enumerable string keys, in order. With
// `indices`, its element indices come first, as numbers (ascending): how to visit a sparse
// array (one element at 2**28, say) without counting up to its length. Without, only the
// keys that are not indices: Object.keys() would make a string of every index first.
Napi::Value ArrayKeys(const Napi::CallbackInfo& info) {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  v8::EscapableHandleScope scope(isolate);
  v8::Local<v8::Value> v = ToV8(info[0]);
  if (!v->IsArray()) {
    Napi::TypeError::New(info.Env(), "tensorproc addon: arrayKeys expects an array").ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  const bool indices = info.Length() > 1 && info[1].ToBoolean().Value();
  v8::Local<v8::Array> keys;
  if (!v.As<v8::Object>()
           ->GetPropertyNames(isolate->GetCurrentContext(), v8::KeyCollectionMode::kOwnOnly,
                              static_cast<v8::PropertyFilter>(v8::ONLY_ENUMERABLE | v8::SKIP_SYMBOLS),
                              indices ? v8::IndexFilter::kIncludeIndices : v8::IndexFilter::kSkipIndices,
                              indices ? v8::KeyConversionMode::kKeepNumbers : v8::KeyConversionMode::kConvertToString)
           .ToLocal(&keys)) {
    return info.Env().Undefined();  // an exception is pending
  }
  return Napi::Value(info.Env(), FromV8(scope.Escape(keys)));
}

}  // namespace

void InitTransport(Napi::Env env, Napi::Object exports) {
  exports.Set("Marker", MarkerClass(env));
  exports.Set("pollNow", Napi::Function::New(env, PollNow));
  exports.Set("arrayKeys", Napi::Function::New(env, ArrayKeys));
}

}  // namespace tp
