#include "common.h"
#include <string.h>
#include <string>

namespace tp {

Napi::Error ErrnoError(Napi::Env env, int err, const char* syscall) {
  const char* name = strerrorname_np(err);
  std::string code = name ? name : ("E" + std::to_string(err));
  std::string msg = std::string(syscall) + " failed: " + strerror(err) + " (" + code + ")";
  Napi::Error e = Napi::Error::New(env, msg);
  e.Set("errno", Napi::Number::New(env, -err));
  e.Set("code", Napi::String::New(env, code));
  e.Set("syscall", Napi::String::New(env, syscall));
  return e;
}

void ThrowErrno(Napi::Env env, int err, const char* syscall) {
  ErrnoError(env, err, syscall).ThrowAsJavaScriptException();
}

bool ArgInt(const Napi::CallbackInfo& info, size_t i, int64_t* out) {
  if (info.Length() <= i || !info[i].IsNumber()) {
    Napi::TypeError::New(info.Env(), "tensorproc addon: argument " + std::to_string(i) + " must be a number")
        .ThrowAsJavaScriptException();
    return false;
  }
  *out = info[i].As<Napi::Number>().Int64Value();
  return true;
}

bool ArgString(const Napi::CallbackInfo& info, size_t i, std::string* out) {
  if (info.Length() <= i || !info[i].IsString()) {
    Napi::TypeError::New(info.Env(), "tensorproc addon: argument " + std::to_string(i) + " must be a string")
        .ThrowAsJavaScriptException();
    return false;
  }
  *out = info[i].As<Napi::String>().Utf8Value();
  return true;
}

}  // namespace tp
