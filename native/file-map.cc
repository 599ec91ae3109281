// NOTE [File mappings and SIGBUS]
// mp.fromFile() maps a file's pages (src/sharing/file-storage.ts). A file mapping, unlike a
// sealed memfd, can be shrunk under us by anyone who may write the file, and touching a page
// past the new end of file is a SIGBUS, which kills the process from inside any JS or C++
// code that reads the memory (a raw `t.data` view included). No kernel facility forbids the
// truncate (seals are for memfds; a read lease, F_SETLEASE, only delays it by
// lease-break-time and cannot be taken while anyone has the file open for writing). So the
// fault is handled instead, as the JVM does for MappedByteBuffer: a SIGBUS handler that finds
// the faulting address in the table of file mappings replaces the whole mapping in place
// (MAP_FIXED) with private anonymous zero pages and raises that mapping's `broken` word. The
// faulting instruction then runs again and reads a zero; tensorproc's tensor methods check
// the word and throw ERR_TP_FILE_TRUNCATED. A SIGBUS at any other address goes to the handler
// that was installed before (or the default action, which ends the process as before).
// The handler only reads the table (atomics) and calls mmap, both safe in a signal handler.
#include "common.h"
#include <atomic>
#include <cerrno>
#include <csignal>
#include <sys/mman.h>
#include <unistd.h>

namespace tp {
namespace {

constexpr int kSlots = 4096;

struct Range {
  std::atomic<uintptr_t> start{0};
  std::atomic<size_t> length{0};
};

Range g_ranges[kSlots];
// One word per slot, read by JS through a SharedArrayBuffer: 1 once the handler replaced the mapping.
alignas(64) int32_t g_broken[kSlots];
std::atomic<bool> g_installed{false};
struct sigaction g_previous;

void OnSigbus(int sig, siginfo_t* si, void* uctx) {
  uintptr_t addr = reinterpret_cast<uintptr_t>(si->si_addr);
  for (int i = 0; i < kSlots; i++) {
    uintptr_t start = g_ranges[i].start.load(std::memory_order_acquire);
    if (start == 0 || addr < start) continue;
    size_t len = g_ranges[i].length.load(std::memory_order_acquire);
    if (addr - start >= len) continue;
    void* r = mmap(reinterpret_cast<void*>(start), len, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r != MAP_FAILED) {
      __atomic_store_n(&g_broken[i], 1, __ATOMIC_RELEASE);
      return;  // the access runs again, over zero pages
    }
    break;
  }
  // Not ours (or the replacement failed): what would have happened without this handler.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) { g_previous.sa_sigaction(sig, si, uctx); return; }
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  signal(SIGBUS, SIG_DFL);  // the access faults again and the default action ends the process
}

bool Install() {
  if (g_installed.load(std::memory_order_acquire)) return true;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = OnSigbus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGBUS, &sa, &g_previous) != 0) return false;
  g_installed.store(true, std::memory_order_release);
  return true;
}

struct FileMapping {
  void* addr;
  size_t size;
  int fd;
  int slot;
};

void Deleter(void*, size_t, void* data) {
  auto* fm = static_cast<FileMapping*>(data);
  // Out of the table before the range is unmapped: a later mapping at the same address is not ours.
  g_ranges[fm->slot].start.store(0, std::memory_order_release);
  g_ranges[fm->slot].length.store(0, std::memory_order_release);
  munmap(fm->addr, fm->size);
  __atomic_store_n(&g_broken[fm->slot], 0, __ATOMIC_RELEASE);
  close(fm->fd);
  delete fm;
}

std::atomic<int> g_next{0};

int TakeSlot(uintptr_t start, size_t len) {
  for (int n = 0; n < kSlots; n++) {
    int i = (g_next.fetch_add(1, std::memory_order_relaxed) % kSlots + kSlots) % kSlots;
    uintptr_t expected = 0;
    if (g_ranges[i].start.load(std::memory_order_relaxed) != 0) continue;
    // Length first: the handler matches a slot only once its start is set.
    g_ranges[i].length.store(len, std::memory_order_relaxed);
    if (g_ranges[i].start.compare_exchange_strong(expected, start, std::memory_order_acq_rel)) return i;
  }
  return -1;
}

// mapFile(fd, fileOffset, length, writable) -> [ArrayBuffer, slot]. Takes the descriptor: it
// is closed with the mapping, when the buffer's backing store is freed (detach or GC).
// writable: MAP_SHARED, writes reach the file; else MAP_PRIVATE, so a write through a raw
// view lands in a private copy-on-write page and never in the file. Throws with errno
// (mmap's), or EMFILE when every slot of the table is taken; the descriptor is then not taken.
Napi::Value MapFile(const Napi::CallbackInfo& info) {
  int64_t fd, off, len, writable;
  if (!ArgInt(info, 0, &fd) || !ArgInt(info, 1, &off) || !ArgInt(info, 2, &len) || !ArgInt(info, 3, &writable)) return info.Env().Undefined();
  if (!Install()) { ThrowErrno(info.Env(), errno, "sigaction"); return info.Env().Undefined(); }
  void* addr = mmap(nullptr, static_cast<size_t>(len), PROT_READ | PROT_WRITE, writable ? MAP_SHARED : MAP_PRIVATE, static_cast<int>(fd), static_cast<off_t>(off));
  if (addr == MAP_FAILED) { ThrowErrno(info.Env(), errno, "mmap"); return info.Env().Undefined(); }
  int slot = TakeSlot(reinterpret_cast<uintptr_t>(addr), static_cast<size_t>(len));
  if (slot < 0) {
    munmap(addr, static_cast<size_t>(len));
    ThrowErrno(info.Env(), EMFILE, "mmap");
    return info.Env().Undefined();
  }
  __atomic_store_n(&g_broken[slot], 0, __ATOMIC_RELEASE);
  auto* fm = new FileMapping{addr, static_cast<size_t>(len), static_cast<int>(fd), slot};
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  auto store = v8::ArrayBuffer::NewBackingStore(addr, static_cast<size_t>(len), Deleter, fm);
  Napi::Array out = Napi::Array::New(info.Env(), 2);
  out.Set(0u, Napi::Value(info.Env(), FromV8(v8::ArrayBuffer::New(isolate, std::move(store)))));
  out.Set(1u, Napi::Number::New(info.Env(), slot));
  return out;
}

// fileBrokenWords() -> SharedArrayBuffer over the table's `broken` words (never freed).
Napi::Value FileBrokenWords(const Napi::CallbackInfo& info) {
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  auto store = v8::SharedArrayBuffer::NewBackingStore(g_broken, sizeof(g_broken), [](void*, size_t, void*) {}, nullptr);
  return Napi::Value(info.Env(), FromV8(v8::SharedArrayBuffer::New(isolate, std::move(store))));
}

}  // namespace

void InitFileMap(Napi::Env env, Napi::Object exports) {
  exports.Set("mapFile", Napi::Function::New(env, MapFile));
  exports.Set("fileBrokenWords", Napi::Function::New(env, FileBrokenWords));
}

}  // namespace tp
