#include "common.h"

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  tp::InitSegment(env, exports);
  tp::InitMapping(env, exports);
  tp::InitFutex(env, exports);
  tp::InitChannel(env, exports);
  tp::InitProcess(env, exports);
  tp::InitPeer(env, exports);
  tp::InitTransport(env, exports);
  tp::InitFill(env, exports);
  tp::InitFileMap(env, exports);
  tp::InitCuda(env, exports);
  return exports;
}

NODE_API_MODULE(tensorproc, Init)
