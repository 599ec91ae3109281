// Channels: non-blocking AF_UNIX SOCK_SEQPACKET socketpairs. The kernel keeps message
// boundaries, lets many processes send and receive on one socket with each message taken
// whole by exactly one receiver, carries descriptors (SCM_RIGHTS), and cannot be left locked
// by a process killed mid-send. Readiness comes from libuv (uv_poll), so the event loop
// never blocks. Framing and policy are in src/transport.
#include "common.h"
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/sockios.h>
#include <unistd.h>
#include <algorithm>
#include <uv.h>
#include <cerrno>

namespace tp {
namespace {

constexpr int kMaxFds = 253;  // SCM_MAX_FD

Napi::Value Socketpair(const Napi::CallbackInfo& info) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
    ThrowErrno(info.Env(), errno, "socketpair");
    return info.Env().Undefined();
  }
  Napi::Array out = Napi::Array::New(info.Env(), 2);
  out.Set(0u, Napi::Number::New(info.Env(), sv[0]));
  out.Set(1u, Napi::Number::New(info.Env(), sv[1]));
  return out;
}

bool BytesArg(const Napi::CallbackInfo& info, size_t i, char** data, size_t* len) {
  if (info.Length() <= i || !info[i].IsTypedArray()) {
    Napi::TypeError::New(info.Env(), "tensorproc addon: expected a Uint8Array").ThrowAsJavaScriptException();
    return false;
  }
  auto view = ToV8(info[i]).As<v8::ArrayBufferView>();
  *data = static_cast<char*>(view->Buffer()->Data()) + view->ByteOffset();
  *len = view->ByteLength();
  return true;
}

// send(fd, bytes, fds?) -> bytes sent, or -EAGAIN when the socket buffer is full. One
// datagram: the kernel sends all of it or none of it.
Napi::Value Send(const Napi::CallbackInfo& info) {
  int64_t fd;
  char* data; size_t len;
  if (!ArgInt(info, 0, &fd) || !BytesArg(info, 1, &data, &len)) return info.Env().Undefined();
  struct iovec iov = {data, len};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  if (info.Length() > 2 && info[2].IsTypedArray()) {
    if (info[2].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
      // Read as int32 words, any other typed array would be read past its end.
      Napi::TypeError::New(info.Env(), "tensorproc addon: descriptors must be an Int32Array").ThrowAsJavaScriptException();
      return info.Env().Undefined();
    }
    auto fds = info[2].As<Napi::Int32Array>();
    size_t n = fds.ElementLength();
    if (n > 0) {
      if (n > kMaxFds) {
        Napi::RangeError::New(info.Env(), "tensorproc addon: too many descriptors in one message").ThrowAsJavaScriptException();
        return info.Env().Undefined();
      }
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * n);
      std::memcpy(CMSG_DATA(c), fds.Data(), sizeof(int) * n);
    }
  }
  ssize_t r;
  do { r = sendmsg(static_cast<int>(fd), &msg, MSG_NOSIGNAL | MSG_DONTWAIT); } while (r < 0 && errno == EINTR);
  if (r < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Napi::Number::New(info.Env(), -EAGAIN);
    ThrowErrno(info.Env(), errno, "sendmsg");
    return info.Env().Undefined();
  }
  return Napi::Number::New(info.Env(), static_cast<double>(r));
}

// NOTE [Receiving descriptors]
// The kernel takes a datagram off the socket before it installs the descriptors it carries
// (scm_detach_fds); one that finds the descriptor table full drops them and sets MSG_CTRUNC,
// and the message is lost (with the references its sender counted for it). So before taking
// a datagram, recv makes sure one slot is free: it closes `reserve` (a descriptor the caller
// set aside for this), or, without one, duplicates and closes the socket (a probe). A full
// table is then EMFILE from `fcntl(F_DUPFD)`, with the datagram still waiting for a later
// receive. One free slot covers a message with one descriptor (a lone tensor, or any message
// over one storage); a message with more that finds fewer free is still lost, and reported
// as EMFILE from `recvmsg` (its descriptors closed). Another thread of the process can take
// the slot between the two calls: then too the message is reported lost.
// A reserve closed for a receive that then finds nothing waiting is replaced at once (an
// eventfd, which holds nothing: one system call while this side has nothing to do anyway)
// and handed back in fdsOut[0], so that the next receive needs no probe either.
// A caller whose datagrams carry witnesses only (NOTE [Witnesses of named segments]) may
// instead receive without either (kDropsSeen): a datagram whose descriptors the kernel had to
// drop is then returned all the same, with fdsOut[0] = -1, and the caller decides whether
// the message needed them (a witness it can do without: the owner's two-tick rule covers a
// reference no descriptor witnesses) or was lost.
// A zero-length datagram reads as 0 like the end of the stream: it is the end only if every
// sending end is closed (RDHUP) and nothing else waits (SIOCINQ), else it is returned as -2
// (no tensorproc process sends one; the caller drops it).
constexpr int kReserveNone = -1;  // probe
constexpr int kNoProbe = -2;      // the caller expects no descriptors (notices, the manager)
constexpr int kDropsSeen = -3;    // no probe; a datagram whose descriptors were dropped is returned

bool EnsureSlot(Napi::Env env, int sock, int reserve) {
  if (reserve >= 0) {
    close(reserve);
    return true;
  }
  if (reserve == kNoProbe || reserve == kDropsSeen) return true;
  int probe = fcntl(sock, F_DUPFD_CLOEXEC, 0);
  if (probe >= 0) {
    close(probe);
    return true;
  }
  if (errno == EMFILE || errno == ENFILE) {
    ThrowErrno(env, errno, "fcntl(F_DUPFD)");
    return false;
  }
  return true;  // a bad socket: recvmsg reports it
}

// Is the end of the stream reached (every sending end closed, nothing queued)?
bool AtEnd(int sock) {
  struct pollfd p = {sock, POLLRDHUP, 0};
  int r;
  do { r = poll(&p, 1, 0); } while (r < 0 && errno == EINTR);
  if (r <= 0 || !(p.revents & (POLLRDHUP | POLLHUP))) return false;
  int queued = 0;
  if (ioctl(sock, SIOCINQ, &queued) != 0) return true;
  return queued == 0;
}

// recv(fd, buffer, fdsOut, reserve = -1) -> length of the datagram, -EAGAIN when none is
// waiting (then, if a reserve was given, fdsOut[0] is its replacement or -1), -1 at end of
// stream (every peer closed), -2 for a zero-length datagram. fdsOut[0]
// receives the descriptor count and fdsOut[1..] the descriptors (close-on-exec). `reserve`:
// NOTE [Receiving descriptors] (a descriptor to close first, -1 to probe, -2 for neither).
// A datagram larger than the buffer, or with more descriptors than fdsOut holds, is an error
// (EMSGSIZE) and its descriptors are closed: nothing leaks.
Napi::Value Recv(const Napi::CallbackInfo& info) {
  int64_t fd;
  char* data; size_t len;
  if (!ArgInt(info, 0, &fd) || !BytesArg(info, 1, &data, &len)) return info.Env().Undefined();
  // Written as int32 words: any other typed array would be written past its end.
  if (info.Length() < 3 || !info[2].IsTypedArray() || info[2].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
    Napi::TypeError::New(info.Env(), "tensorproc addon: expected an Int32Array for descriptors").ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  int64_t reserve = kReserveNone;
  if (info.Length() > 3 && !ArgInt(info, 3, &reserve)) return info.Env().Undefined();
  auto fdsOut = info[2].As<Napi::Int32Array>();
  if (!EnsureSlot(info.Env(), static_cast<int>(fd), static_cast<int>(reserve))) return info.Env().Undefined();
  struct iovec iov = {data, len};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t r;
  do { r = recvmsg(static_cast<int>(fd), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT); } while (r < 0 && errno == EINTR);
  if (r < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (reserve >= 0) fdsOut[0] = eventfd(0, EFD_CLOEXEC);  // -1 if none can be had: the next receive probes
      return Napi::Number::New(info.Env(), -EAGAIN);
    }
    ThrowErrno(info.Env(), errno, "recvmsg");
    return info.Env().Undefined();
  }
  // The control buffer holds kMaxFds, all a sender can attach (the kernel installs what fits
  // and truncates the rest), so `got` never overflows.
  int got[kMaxFds];
  size_t nfds = 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      const int* p = reinterpret_cast<const int*>(CMSG_DATA(c));
      for (size_t j = 0; j < k && nfds < kMaxFds; j++) got[nfds++] = p[j];
    }
  }
  // A truncated control part means the kernel could not install them all (NOTE [Receiving
  // descriptors]).
  bool dropped = (msg.msg_flags & MSG_CTRUNC) != 0;
  if (dropped && reserve != kDropsSeen) {
    for (size_t k = 0; k < nfds; k++) close(got[k]);
    ThrowErrno(info.Env(), EMFILE, "recvmsg");
    return info.Env().Undefined();
  }
  bool tooMany = nfds + 1 > fdsOut.ElementLength();
  if ((msg.msg_flags & MSG_TRUNC) || tooMany) {
    for (size_t k = 0; k < nfds; k++) close(got[k]);
    ThrowErrno(info.Env(), EMSGSIZE, "recvmsg");
    return info.Env().Undefined();
  }
  if (dropped) {
    for (size_t k = 0; k < nfds; k++) close(got[k]);  // some of them: the message has them all or none
    fdsOut[0] = -1;
    return Napi::Number::New(info.Env(), static_cast<double>(r));
  }
  if (r == 0 && nfds == 0) return Napi::Number::New(info.Env(), AtEnd(static_cast<int>(fd)) ? -1 : -2);
  fdsOut[0] = static_cast<int32_t>(nfds);
  for (size_t k = 0; k < nfds; k++) fdsOut[k + 1] = got[k];
  return Napi::Number::New(info.Env(), static_cast<double>(r));
}

// closeFds(fds: Int32Array, n) closes fds[0..n) (distinct descriptors the caller owns; the
// array is reordered). Contiguous runs go in one close_range() each (Linux 5.9), so closing
// the witnesses a receiver gathered (NOTE [Witness bin], src/sharing/witness-bin.ts), which
// the kernel numbered from the lowest free slot up, is mostly one system call.
Napi::Value CloseFds(const Napi::CallbackInfo& info) {
  int64_t n;
  if (info.Length() < 2 || !info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array ||
      !ArgInt(info, 1, &n)) {
    Napi::TypeError::New(info.Env(), "tensorproc addon: expected (Int32Array, count)").ThrowAsJavaScriptException();
    return info.Env().Undefined();
  }
  auto fds = info[0].As<Napi::Int32Array>();
  size_t count = std::min(static_cast<size_t>(std::max<int64_t>(n, 0)), fds.ElementLength());
  int32_t* d = fds.Data();
  std::sort(d, d + count);
  static bool haveCloseRange = true;
  for (size_t i = 0; i < count;) {
    size_t j = i;
    while (j + 1 < count && d[j + 1] == d[j] + 1) j++;
    if (j > i && haveCloseRange) {
      if (syscall(SYS_close_range, static_cast<unsigned>(d[i]), static_cast<unsigned>(d[j]), 0u) == 0) {
        i = j + 1;
        continue;
      }
      if (errno == ENOSYS) haveCloseRange = false;  // before Linux 5.9: one by one
    }
    for (size_t k = i; k <= j; k++) close(d[k]);
    i = j + 1;
  }
  return info.Env().Undefined();
}

// Poll: readiness of a descriptor from the event loop (uv_poll). The callback gets
// (status, events) with events a mask of 1 readable, 2 writable, 4 disconnect.
class Poll : public Napi::ObjectWrap<Poll> {
 public:
  static Napi::Function Class(Napi::Env env) {
    return DefineClass(env, "Poll", {
      InstanceMethod("start", &Poll::Start),
      InstanceMethod("stop", &Poll::Stop),
      InstanceMethod("close", &Poll::Close),
      InstanceMethod("ref", &Poll::Ref_),
      InstanceMethod("unref", &Poll::Unref_),
    });
  }

  Poll(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Poll>(info), ctx_(info.Env(), "tensorproc.Poll") {
    int64_t fd;
    if (!ArgInt(info, 0, &fd)) return;
    if (info.Length() < 2 || !info[1].IsFunction()) {
      Napi::TypeError::New(info.Env(), "tensorproc addon: Poll needs a callback").ThrowAsJavaScriptException();
      return;
    }
    cb_ = Napi::Persistent(info[1].As<Napi::Function>());
    uv_loop_t* loop;
    napi_get_uv_event_loop(info.Env(), &loop);
    handle_ = new uv_poll_t;
    int r = uv_poll_init(loop, handle_, static_cast<int>(fd));
    if (r != 0) {
      delete handle_;
      handle_ = nullptr;
      ThrowErrno(info.Env(), -r, "uv_poll_init");
      return;
    }
    handle_->data = this;
  }

  ~Poll() override { CloseHandle(); }

 private:
  static void OnPoll(uv_poll_t* h, int status, int events) {
    Poll* self = static_cast<Poll*>(h->data);
    Napi::Env env = self->Env();
    Napi::HandleScope scope(env);
    // MakeCallback, not Call: it runs the microtask queue and nextTicks afterwards, as any
    // Node I/O callback does. The receiver must be an object (napi_make_callback converts it
    // with ToObject). The raw call, not node-addon-api's: while Node tears the environment
    // down (an unref'd poll still active at exit) JS cannot run, the call fails with no
    // exception, and node-addon-api would abort the process trying to throw one.
    napi_value argv[2] = {Napi::Number::New(env, status), Napi::Number::New(env, events)};
    napi_value result;
    napi_status s = napi_make_callback(env, self->ctx_, self->Value(), self->cb_.Value(), 2, argv, &result);
    if (s == napi_pending_exception) {
      // The callback threw: hand it to process 'uncaughtException', as Node does for its own callbacks.
      napi_value err;
      if (napi_get_and_clear_last_exception(env, &err) == napi_ok) napi_fatal_exception(env, err);
    }
  }

  Napi::Value Start(const Napi::CallbackInfo& info) {
    if (!handle_) return info.Env().Undefined();
    int events = info[0].As<Napi::Number>().Int32Value();
    int r = uv_poll_start(handle_, events, OnPoll);
    if (r != 0) { ThrowErrno(info.Env(), -r, "uv_poll_start"); return info.Env().Undefined(); }
    // While active, the JS object must not be collected: its callback may still fire.
    if (self_.IsEmpty()) self_ = Napi::Persistent(Value());
    return info.Env().Undefined();
  }

  Napi::Value Stop(const Napi::CallbackInfo& info) {
    if (handle_) uv_poll_stop(handle_);
    if (!self_.IsEmpty()) self_.Reset();
    return info.Env().Undefined();
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    CloseHandle();
    if (!self_.IsEmpty()) self_.Reset();
    return info.Env().Undefined();
  }

  Napi::Value Ref_(const Napi::CallbackInfo& info) {
    if (handle_) uv_ref(reinterpret_cast<uv_handle_t*>(handle_));
    return info.Env().Undefined();
  }
  Napi::Value Unref_(const Napi::CallbackInfo& info) {
    if (handle_) uv_unref(reinterpret_cast<uv_handle_t*>(handle_));
    return info.Env().Undefined();
  }

  void CloseHandle() {
    if (!handle_) return;
    handle_->data = nullptr;
    // The handle's memory must outlive uv_close: free it in the close callback.
    uv_close(reinterpret_cast<uv_handle_t*>(handle_), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
    handle_ = nullptr;
  }

  uv_poll_t* handle_ = nullptr;
  Napi::FunctionReference cb_;
  Napi::ObjectReference self_;
  Napi::AsyncContext ctx_;
};

// reserveFd() -> a descriptor that holds nothing (an eventfd), to keep a slot for later
// (NOTE [Receive reserve], src/sharing/descriptors.ts).
Napi::Value ReserveFd(const Napi::CallbackInfo& info) {
  int fd = eventfd(0, EFD_CLOEXEC);
  if (fd < 0) { ThrowErrno(info.Env(), errno, "eventfd"); return info.Env().Undefined(); }
  return Napi::Number::New(info.Env(), fd);
}

}  // namespace

void InitChannel(Napi::Env env, Napi::Object exports) {
  exports.Set("socketpair", Napi::Function::New(env, Socketpair));
  exports.Set("send", Napi::Function::New(env, Send));
  exports.Set("recv", Napi::Function::New(env, Recv));
  exports.Set("reserveFd", Napi::Function::New(env, ReserveFd));
  exports.Set("closeFds", Napi::Function::New(env, CloseFds));
  exports.Set("Poll", Poll::Class(env));
}

}  // namespace tp
