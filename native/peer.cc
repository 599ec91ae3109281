// Peers: the primitives behind the file_system manager (src/sharing/manager). A named
// AF_UNIX SOCK_SEQPACKET socket (bind/listen/accept/connect), the credentials of the process
// at the other end (SO_PEERCRED), a pidfd that becomes readable when a process exits, and an
// advisory lock that dies with its holder. I/O on the sockets uses send/recv/Poll of
// channel.cc. Every decision (who may connect, what a message means) is made in TypeScript.
#include "common.h"
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include <cerrno>

namespace tp {
namespace {

bool Address(Napi::Env env, const std::string& path, struct sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr->sun_path)) {
    ThrowErrno(env, ENAMETOOLONG, "bind");
    return false;
  }
  std::memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return true;
}

// unixListen(path, backlog) -> fd: a non-blocking listening SEQPACKET socket bound to path.
Napi::Value UnixListen(const Napi::CallbackInfo& info) {
  std::string path; int64_t backlog;
  if (!ArgString(info, 0, &path) || !ArgInt(info, 1, &backlog)) return info.Env().Undefined();
  struct sockaddr_un addr;
  if (!Address(info.Env(), path, &addr)) return info.Env().Undefined();
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) { ThrowErrno(info.Env(), errno, "socket"); return info.Env().Undefined(); }
  if (bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0) {
    int e = errno; close(fd); ThrowErrno(info.Env(), e, "bind"); return info.Env().Undefined();
  }
  if (listen(fd, static_cast<int>(backlog)) != 0) {
    int e = errno; close(fd); ThrowErrno(info.Env(), e, "listen"); return info.Env().Undefined();
  }
  return Napi::Number::New(info.Env(), fd);
}

// unixConnect(path) -> fd: a non-blocking SEQPACKET socket connected to path. A unix socket
// connects at once or fails (ENOENT, ECONNREFUSED, EAGAIN when the backlog is full).
Napi::Value UnixConnect(const Napi::CallbackInfo& info) {
  std::string path;
  if (!ArgString(info, 0, &path)) return info.Env().Undefined();
  struct sockaddr_un addr;
  if (!Address(info.Env(), path, &addr)) return info.Env().Undefined();
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) { ThrowErrno(info.Env(), errno, "socket"); return info.Env().Undefined(); }
  int r;
  do { r = connect(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)); } while (r != 0 && errno == EINTR);
  if (r != 0) { int e = errno; close(fd); ThrowErrno(info.Env(), e, "connect"); return info.Env().Undefined(); }
  return Napi::Number::New(info.Env(), fd);
}

// accept(fd) -> new fd (non-blocking, close-on-exec), or -EAGAIN when none is waiting.
Napi::Value Accept(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgInt(info, 0, &fd)) return info.Env().Undefined();
  int c;
  do { c = accept4(static_cast<int>(fd), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC); } while (c < 0 && errno == EINTR);
  if (c < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Napi::Number::New(info.Env(), -EAGAIN);
    ThrowErrno(info.Env(), errno, "accept4");
    return info.Env().Undefined();
  }
  return Napi::Number::New(info.Env(), c);
}

// peerCredentials(fd) -> [pid, uid, gid] of the process that connected (SO_PEERCRED: taken
// by the kernel at connect time, not claimed by the peer).
Napi::Value PeerCredentials(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgInt(info, 0, &fd)) return info.Env().Undefined();
  struct ucred cred;
  socklen_t len = sizeof(cred);
  if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    ThrowErrno(info.Env(), errno, "getsockopt(SO_PEERCRED)");
    return info.Env().Undefined();
  }
  Napi::Array out = Napi::Array::New(info.Env(), 3);
  out.Set(0u, Napi::Number::New(info.Env(), cred.pid));
  out.Set(1u, Napi::Number::New(info.Env(), cred.uid));
  out.Set(2u, Napi::Number::New(info.Env(), cred.gid));
  return out;
}

// pidfdOpen(pid) -> fd that polls readable once the process has exited (Linux 5.3+). It
// names that one process: a pid reused later does not make it readable or unreadable.
Napi::Value PidfdOpen(const Napi::CallbackInfo& info) {
  int64_t pid;
  if (!ArgInt(info, 0, &pid)) return info.Env().Undefined();
#ifdef SYS_pidfd_open
  long fd = syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0);
  if (fd < 0) { ThrowErrno(info.Env(), errno, "pidfd_open"); return info.Env().Undefined(); }
  fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  return Napi::Number::New(info.Env(), static_cast<double>(fd));
#else
  ThrowErrno(info.Env(), ENOSYS, "pidfd_open");
  return info.Env().Undefined();
#endif
}

// tryLock(fd) -> true if this process now holds an exclusive flock on fd, false if another
// does. The kernel drops the lock with the holder's last descriptor, killed or not.
Napi::Value TryLock(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgInt(info, 0, &fd)) return info.Env().Undefined();
  int r;
  do { r = flock(static_cast<int>(fd), LOCK_EX | LOCK_NB); } while (r != 0 && errno == EINTR);
  if (r == 0) return Napi::Boolean::New(info.Env(), true);
  if (errno == EWOULDBLOCK) return Napi::Boolean::New(info.Env(), false);
  ThrowErrno(info.Env(), errno, "flock");
  return info.Env().Undefined();
}

// raiseFileLimit() -> the open-file soft limit after raising it to the hard limit. The
// manager needs a descriptor per client, and inherits the limit of whoever started it.
Napi::Value RaiseFileLimit(const Napi::CallbackInfo& info) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) { ThrowErrno(info.Env(), errno, "getrlimit"); return info.Env().Undefined(); }
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) getrlimit(RLIMIT_NOFILE, &rl);
  }
  return Napi::Number::New(info.Env(), static_cast<double>(rl.rlim_cur));
}

// fileLimit() -> the open-file soft limit now (getrlimit; another process may change it).
Napi::Value FileLimit(const Napi::CallbackInfo& info) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) { ThrowErrno(info.Env(), errno, "getrlimit"); return info.Env().Undefined(); }
  return Napi::Number::New(info.Env(), rl.rlim_cur == RLIM_INFINITY ? 1e9 : static_cast<double>(rl.rlim_cur));
}

}  // namespace

void InitPeer(Napi::Env env, Napi::Object exports) {
  exports.Set("unixListen", Napi::Function::New(env, UnixListen));
  exports.Set("unixConnect", Napi::Function::New(env, UnixConnect));
  exports.Set("accept", Napi::Function::New(env, Accept));
  exports.Set("peerCredentials", Napi::Function::New(env, PeerCredentials));
  exports.Set("pidfdOpen", Napi::Function::New(env, PidfdOpen));
  exports.Set("tryLock", Napi::Function::New(env, TryLock));
  exports.Set("raiseFileLimit", Napi::Function::New(env, RaiseFileLimit));
  exports.Set("fileLimit", Napi::Function::New(env, FileLimit));
}

}  // namespace tp
