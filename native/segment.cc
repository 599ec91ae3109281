// Segments: the descriptors behind shared memory. memfd for 'file_descriptor' (anonymous:
// the memory dies with its last descriptor and mapping), shm_open for 'file_system' (named
// under /dev/shm). See NOTE [Segment lifetime] in src/sharing/segment.ts for who frees what.
#include "common.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>

namespace tp {
namespace {

// tmpfs allocates lazily: without this, a segment larger than the free space is created
// fine and the first write past the free space kills the process with SIGBUS. fallocate
// reserves every page now, so a full /dev/shm is a clean ENOSPC here.
int Reserve(int fd, int64_t size) {
  if (size == 0) return 0;
  int r;
  do { r = posix_fallocate(fd, 0, size); } while (r == EINTR);
  return r;
}

// memfdCreate(name, size) -> fd, sized, reserved and sealed against resizing.
Napi::Value MemfdCreate(const Napi::CallbackInfo& info) {
  std::string name; int64_t size;
  if (!ArgString(info, 0, &name) || !ArgInt(info, 1, &size)) return info.Env().Undefined();
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) { ThrowErrno(info.Env(), errno, "memfd_create"); return info.Env().Undefined(); }
  int r = Reserve(fd, size);
  if (r != 0) { close(fd); ThrowErrno(info.Env(), r, "posix_fallocate"); return info.Env().Undefined(); }
  // A receiver maps `size` bytes; if a peer could shrink the file, touching the tail would
  // SIGBUS the receiver. Seal the size, and seal the seals.
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    int e = errno; close(fd); ThrowErrno(info.Env(), e, "fcntl(F_ADD_SEALS)"); return info.Env().Undefined();
  }
  return Napi::Number::New(info.Env(), fd);
}

// shmCreate(name, size) -> fd. Exclusive create with mode 0600; on any failure the name is
// removed again so nothing is left in /dev/shm.
Napi::Value ShmCreate(const Napi::CallbackInfo& info) {
  std::string name; int64_t size;
  if (!ArgString(info, 0, &name) || !ArgInt(info, 1, &size)) return info.Env().Undefined();
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) { ThrowErrno(info.Env(), errno, "shm_open"); return info.Env().Undefined(); }
  int r = Reserve(fd, size);
  if (r != 0) {
    shm_unlink(name.c_str()); close(fd);
    ThrowErrno(info.Env(), r, "posix_fallocate");
    return info.Env().Undefined();
  }
  return Napi::Number::New(info.Env(), fd);
}

Napi::Value ShmOpen(const Napi::CallbackInfo& info) {
  std::string name;
  if (!ArgString(info, 0, &name)) return info.Env().Undefined();
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) { ThrowErrno(info.Env(), errno, "shm_open"); return info.Env().Undefined(); }
  return Napi::Number::New(info.Env(), fd);
}

Napi::Value ShmUnlink(const Napi::CallbackInfo& info) {
  std::string name;
  if (!ArgString(info, 0, &name)) return info.Env().Undefined();
  if (shm_unlink(name.c_str()) != 0) { ThrowErrno(info.Env(), errno, "shm_unlink"); }
  return info.Env().Undefined();
}

// fstat(fd) -> [size, dev, ino, mode, uid]: the real size (checked against what a handle
// claims), the identity by which one segment received twice is recognised as one, and the
// type and owner of the file (the manager removes only regular files of its own user).
Napi::Value Fstat(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgInt(info, 0, &fd)) return info.Env().Undefined();
  struct stat st;
  if (fstat(static_cast<int>(fd), &st) != 0) { ThrowErrno(info.Env(), errno, "fstat"); return info.Env().Undefined(); }
  Napi::Array out = Napi::Array::New(info.Env(), 5);
  out.Set(0u, Napi::Number::New(info.Env(), static_cast<double>(st.st_size)));
  out.Set(1u, Napi::Number::New(info.Env(), static_cast<double>(st.st_dev)));
  out.Set(2u, Napi::Number::New(info.Env(), static_cast<double>(st.st_ino)));
  out.Set(3u, Napi::Number::New(info.Env(), static_cast<double>(st.st_mode)));
  out.Set(4u, Napi::Number::New(info.Env(), static_cast<double>(st.st_uid)));
  return out;
}

// memfdInfo(fd) -> [size, dev, ino, seals]: fstat and F_GET_SEALS in one call, for a
// received descriptor about to be mapped. seals is -1 for a file that cannot be sealed (not
// a memfd: a pipe, a socket, a file on disk), whose size nothing stops its sender changing.
Napi::Value MemfdInfo(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgInt(info, 0, &fd)) return info.Env().Undefined();
  struct stat st;
  if (fstat(static_cast<int>(fd), &st) != 0) { ThrowErrno(info.Env(), errno, "fstat"); return info.Env().Undefined(); }
  int seals = S_ISREG(st.st_mode) ? fcntl(static_cast<int>(fd), F_GET_SEALS) : -1;
  Napi::Array out = Napi::Array::New(info.Env(), 4);
  out.Set(0u, Napi::Number::New(info.Env(), static_cast<double>(st.st_size)));
  out.Set(1u, Napi::Number::New(info.Env(), static_cast<double>(st.st_dev)));
  out.Set(2u, Napi::Number::New(info.Env(), static_cast<double>(st.st_ino)));
  out.Set(3u, Napi::Number::New(info.Env(), seals < 0 ? -1 : seals));
  return out;
}

Napi::Value Close(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgInt(info, 0, &fd)) return info.Env().Undefined();
  // Linux closes the descriptor even when close() reports EINTR: never retry.
  if (close(static_cast<int>(fd)) != 0 && errno != EINTR) ThrowErrno(info.Env(), errno, "close");
  return info.Env().Undefined();
}

Napi::Value Dup(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgInt(info, 0, &fd)) return info.Env().Undefined();
  int r = fcntl(static_cast<int>(fd), F_DUPFD_CLOEXEC, 3);
  if (r < 0) { ThrowErrno(info.Env(), errno, "dup"); return info.Env().Undefined(); }
  return Napi::Number::New(info.Env(), r);
}

// A new open file description of the file behind `fd` (its own OFD locks, unlike a dup):
// for the owner's probe of a segment's sent descriptor (NOTE [Orphans in flight],
// src/sharing/in-flight.ts).
Napi::Value Reopen(const Napi::CallbackInfo& info) {
  int64_t fd;
  if (!ArgInt(info, 0, &fd)) return info.Env().Undefined();
  char path[40];
  snprintf(path, sizeof path, "/proc/self/fd/%d", static_cast<int>(fd));
  int r = open(path, O_RDWR | O_CLOEXEC);
  if (r < 0) { ThrowErrno(info.Env(), errno, "open"); return info.Env().Undefined(); }
  return Napi::Number::New(info.Env(), r);
}

// ofdLock(fd, at): a read lock on byte `at`, owned by fd's open file description: it lasts
// while any descriptor of that description exists, in any process or in a message in flight.
Napi::Value OfdLock(const Napi::CallbackInfo& info) {
  int64_t fd, at;
  if (!ArgInt(info, 0, &fd) || !ArgInt(info, 1, &at)) return info.Env().Undefined();
  struct flock l = {};
  l.l_type = F_RDLCK;
  l.l_whence = SEEK_SET;
  l.l_start = at;
  l.l_len = 1;
  if (fcntl(static_cast<int>(fd), F_OFD_SETLK, &l) != 0) ThrowErrno(info.Env(), errno, "fcntl");
  return info.Env().Undefined();
}

// ofdLocked(fd, at): whether another open file description holds a lock on byte `at`.
Napi::Value OfdLocked(const Napi::CallbackInfo& info) {
  int64_t fd, at;
  if (!ArgInt(info, 0, &fd) || !ArgInt(info, 1, &at)) return info.Env().Undefined();
  struct flock l = {};
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  l.l_start = at;
  l.l_len = 1;
  if (fcntl(static_cast<int>(fd), F_OFD_GETLK, &l) != 0) {
    ThrowErrno(info.Env(), errno, "fcntl");
    return info.Env().Undefined();
  }
  return Napi::Boolean::New(info.Env(), l.l_type != F_UNLCK);
}

}  // namespace

void InitSegment(Napi::Env env, Napi::Object exports) {
  exports.Set("memfdCreate", Napi::Function::New(env, MemfdCreate));
  exports.Set("shmCreate", Napi::Function::New(env, ShmCreate));
  exports.Set("shmOpen", Napi::Function::New(env, ShmOpen));
  exports.Set("shmUnlink", Napi::Function::New(env, ShmUnlink));
  exports.Set("fstat", Napi::Function::New(env, Fstat));
  exports.Set("memfdInfo", Napi::Function::New(env, MemfdInfo));
  exports.Set("SEAL_SHRINK", Napi::Number::New(env, F_SEAL_SHRINK));
  exports.Set("close", Napi::Function::New(env, Close));
  exports.Set("dup", Napi::Function::New(env, Dup));
  exports.Set("reopen", Napi::Function::New(env, Reopen));
  exports.Set("ofdLock", Napi::Function::New(env, OfdLock));
  exports.Set("ofdLocked", Napi::Function::New(env, OfdLocked));
}

}  // namespace tp
