// Futex wait/wake on a word of a shared mapping. Atomics.wait/notify keep their waiters per
// process, so they cannot wake a waiter in another process; the futex syscall without
// FUTEX_PRIVATE_FLAG keys waiters by the physical page and can.
#include "mapping.h"
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <mutex>
#include <thread>
#include <system_error>

namespace tp {

namespace {

enum WaitResult { kOk = 0, kTimedOut = 1, kNotEqual = 2 };

// Waits while *word == expected, at most timeoutMs (< 0: forever). Spurious wake-ups and
// signals return kOk; callers re-check their condition, as with any futex.
// Timeouts past this (about 31,700 years), Infinity included, are no timeout: converting
// them to a timespec would overflow time_t, which the kernel refuses with EINVAL.
constexpr double kForeverMs = 1e15;

int WaitOn(uint32_t* word, uint32_t expected, double timeoutMs, int* err) {
  struct timespec ts, *tsp = nullptr;
  if (timeoutMs >= 0 && timeoutMs < kForeverMs) {
    ts.tv_sec = static_cast<time_t>(timeoutMs / 1000);
    ts.tv_nsec = static_cast<long>((timeoutMs - ts.tv_sec * 1000.0) * 1e6);
    tsp = &ts;
  }
  long r = syscall(SYS_futex, word, FUTEX_WAIT, expected, tsp, nullptr, 0);
  if (r == 0) return kOk;
  if (errno == ETIMEDOUT) return kTimedOut;
  if (errno == EAGAIN) return kNotEqual;
  if (errno == EINTR) return kOk;
  *err = errno;
  return -1;
}

bool WordArg(const Napi::CallbackInfo& info, Mapping** m, uint32_t** word) {
  *m = ArgMapping(info, 0);
  if (!*m) return false;
  int64_t off;
  if (!ArgInt(info, 1, &off)) return false;
  if (off < 0 || off % 4 != 0 || static_cast<size_t>(off) + 4 > (*m)->size) {
    Napi::RangeError::New(info.Env(), "tensorproc addon: futex word outside the mapping or misaligned")
        .ThrowAsJavaScriptException();
    return false;
  }
  *word = reinterpret_cast<uint32_t*>(static_cast<char*>((*m)->addr) + off);
  return true;
}

const char* ResultName(int r) { return r == kOk ? "ok" : r == kTimedOut ? "timed-out" : "not-equal"; }

// futexWait(mapping, byteOffset, expected, timeoutMs) -> 'ok' | 'timed-out' | 'not-equal'.
// Blocks the calling thread: for worker threads and synchronous code only.
Napi::Value FutexWait(const Napi::CallbackInfo& info) {
  Mapping* m; uint32_t* word;
  if (!WordArg(info, &m, &word)) return info.Env().Undefined();
  uint32_t expected = info[2].As<Napi::Number>().Uint32Value();
  double timeout = info[3].As<Napi::Number>().DoubleValue();
  int err = 0;
  int r = WaitOn(word, expected, timeout, &err);
  if (r < 0) { ThrowErrno(info.Env(), err, "futex(FUTEX_WAIT)"); return info.Env().Undefined(); }
  return Napi::String::New(info.Env(), ResultName(r));
}

// spinWhile(mapping, byteOffset, expected, maxUs) -> whether the word left `expected` within
// maxUs µs. Blocks the calling thread for that long at most, with no system call: the pause
// hint between loads (a core shared with another hardware thread leaves it the core, and the
// loop does not flood the memory system), the clock read every 64 loads. For NOTE [Spinning
// before sleeping] (src/queue/spin.ts).
Napi::Value SpinWhile(const Napi::CallbackInfo& info) {
  Mapping* m; uint32_t* word;
  if (!WordArg(info, &m, &word)) return info.Env().Undefined();
  uint32_t expected = info[2].As<Napi::Number>().Uint32Value();
  double maxUs = info[3].As<Napi::Number>().DoubleValue();
  auto* w = reinterpret_cast<std::atomic<uint32_t>*>(word);
  auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(static_cast<int64_t>(maxUs * 1000));
  for (;;) {
    for (int i = 0; i < 64; i++) {
      if (w->load(std::memory_order_acquire) != expected) return Napi::Boolean::New(info.Env(), true);
      __builtin_ia32_pause();
    }
    if (std::chrono::steady_clock::now() >= until) return Napi::Boolean::New(info.Env(), false);
  }
}

// futexWake(mapping, byteOffset, count) -> number of waiters woken.
Napi::Value FutexWake(const Napi::CallbackInfo& info) {
  Mapping* m; uint32_t* word;
  if (!WordArg(info, &m, &word)) return info.Env().Undefined();
  int64_t count;
  if (!ArgInt(info, 2, &count)) return info.Env().Undefined();
  int n = count > INT_MAX || count < 0 ? INT_MAX : static_cast<int>(count);
  long r = syscall(SYS_futex, word, FUTEX_WAKE, n, nullptr, nullptr, 0);
  if (r < 0) { ThrowErrno(info.Env(), errno, "futex(FUTEX_WAKE)"); return info.Env().Undefined(); }
  return Napi::Number::New(info.Env(), static_cast<double>(r));
}

// NOTE [Async futex waits and teardown]
// futexWaitAsync waits on a thread of its own and settles its promise through a
// thread-safe function (TSFN). The thread may outlive the environment that asked: a worker
// thread exits (or is terminated) while its wait is pending. Node then finalizes and frees
// the TSFN, and a later call on it (when the word is woken or the wait times out) is a
// use-after-free that aborts the process. So the thread and the TSFN's finalizer share a
// `WaitLink`: the finalizer marks it gone under its mutex, and the thread calls the TSFN only
// under that mutex while it is not gone; the finalizer waits at most for that call. A wait
// whose environment is gone lets go of its mapping when it ends; its thread lives until the
// word is woken or the timeout passes (nothing can interrupt one waiter of a futex alone).
struct WaitLink {
  std::mutex mu;
  bool envGone = false;
  std::atomic<int> holders{2};  // the waiting thread and the TSFN finalizer
  void Drop() {
    if (holders.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

struct AsyncWait {
  Mapping* m;
  uint32_t* word;
  uint32_t expected;
  double timeout;
  int result = 0;
  int err = 0;
  Napi::Promise::Deferred deferred;
};

// Runs on the loop thread, or with env == nullptr when the environment is torn down with the
// call still queued (then the promise can never be settled: only the memory is let go).
void ResolveOnLoop(Napi::Env env, Napi::Function, std::nullptr_t*, AsyncWait* w) {
  if (env != nullptr) {
    if (w->result < 0) {
      w->deferred.Reject(ErrnoError(env, w->err, "futex(FUTEX_WAIT)").Value());
    } else {
      w->deferred.Resolve(Napi::String::New(env, ResultName(w->result)));
    }
  }
  MappingRelease(w->m);
  delete w;
}

using WaitTsfn = Napi::TypedThreadSafeFunction<std::nullptr_t, AsyncWait, ResolveOnLoop>;

// Wait threads that have not finished yet, in this process (all environments): a test can
// then tell when an orphaned wait has ended instead of guessing how long that takes.
std::atomic<int> gWaitThreads{0};

// futexWaitAsync(mapping, byteOffset, expected, timeoutMs) -> Promise of the same strings.
// The wait runs on a thread of its own, never on libuv's pool (four threads shared with fs
// and dns, which a few long waits would starve). The pending wait keeps the event loop
// alive, as a pending timer would. See NOTE [Async futex waits and teardown].
Napi::Value FutexWaitAsync(const Napi::CallbackInfo& info) {
  Mapping* m; uint32_t* word;
  if (!WordArg(info, &m, &word)) return info.Env().Undefined();
  auto* w = new AsyncWait{m, word, info[2].As<Napi::Number>().Uint32Value(),
                          info[3].As<Napi::Number>().DoubleValue(), 0, 0,
                          Napi::Promise::Deferred::New(info.Env())};
  Napi::Value promise = w->deferred.Promise();
  MappingRetain(m);  // the word must stay mapped while the thread waits on it
  auto* link = new WaitLink();
  WaitTsfn tsfn = WaitTsfn::New(info.Env(), "tensorproc.futexWaitAsync", 0, 1, nullptr,
                                [](Napi::Env, WaitLink* l, std::nullptr_t*) {
                                  { std::lock_guard<std::mutex> lock(l->mu); l->envGone = true; }
                                  l->Drop();
                                },
                                link);
  gWaitThreads.fetch_add(1, std::memory_order_relaxed);
  try {
  std::thread([w, tsfn, link]() mutable {
    w->result = WaitOn(w->word, w->expected, w->timeout, &w->err);
    {
      std::lock_guard<std::mutex> lock(link->mu);
      // napi_closing: the environment is closing and the call was refused; the TSFN must not
      // be touched again (not even released).
      if (!link->envGone && tsfn.BlockingCall(w) == napi_ok) {
        tsfn.Release();
        w = nullptr;
      }
    }
    if (w != nullptr) {
      MappingRelease(w->m);
      delete w;
    }
    link->Drop();
    gWaitThreads.fetch_sub(1, std::memory_order_release);
  }).detach();
  } catch (const std::system_error& e) {
    // No thread (out of threads or memory): undo what the thread would have let go of.
    gWaitThreads.fetch_sub(1, std::memory_order_release);
    tsfn.Release();  // its finalizer drops the TSFN's share of the link
    link->Drop();    // and this is the thread's share
    MappingRelease(m);
    w->deferred.Reject(ErrnoError(info.Env(), e.code().value(), "futexWaitAsync (starting its thread)").Value());
    delete w;
  }
  return promise;
}

}  // namespace

void InitFutex(Napi::Env env, Napi::Object exports) {
  exports.Set("futexWait", Napi::Function::New(env, FutexWait));
  exports.Set("spinWhile", Napi::Function::New(env, SpinWhile));
  exports.Set("futexWake", Napi::Function::New(env, FutexWake));
  exports.Set("futexWaitAsync", Napi::Function::New(env, FutexWaitAsync));
  exports.Set("futexWaitThreads", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), gWaitThreads.load(std::memory_order_acquire));
  }));
}

}  // namespace tp
