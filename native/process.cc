// Process primitives for src/process: dying with the parent.
#include "common.h"
#include <sys/prctl.h>
#include <unistd.h>
#include <cerrno>

namespace tp {
namespace {

// setParentDeathSignal(signal): the kernel sends `signal` to this process when the thread
// that forked it exits, SIGKILL of the parent included. Callers must check getppid()
// afterwards: a parent that died before the prctl is not noticed by it.
Napi::Value SetParentDeathSignal(const Napi::CallbackInfo& info) {
  int64_t sig;
  if (!ArgInt(info, 0, &sig)) return info.Env().Undefined();
  if (prctl(PR_SET_PDEATHSIG, static_cast<unsigned long>(sig), 0, 0, 0) != 0) {
    ThrowErrno(info.Env(), errno, "prctl(PR_SET_PDEATHSIG)");
  }
  return info.Env().Undefined();
}

Napi::Value Getppid(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), getppid()); }

}  // namespace

void InitProcess(Napi::Env env, Napi::Object exports) {
  exports.Set("setParentDeathSignal", Napi::Function::New(env, SetParentDeathSignal));
  exports.Set("getppid", Napi::Function::New(env, Getppid));
}

}  // namespace tp
