"""Atomic operations on 32-bit words of shared memory, and futex wakes.

Pure Python has no compare-and-swap, so this module calls GCC's libatomic (Debian package
``libatomic1``) through ctypes. For a naturally aligned 4-byte word libatomic uses the
processor's own lock-free instructions (``lock cmpxchg`` / ``lock xadd`` on x86-64, LSE or
LL/SC on arm64): the very instructions V8 emits for ``Atomics.*`` on a SharedArrayBuffer, so a
Python process and Node processes operate on one header word correctly at the same time.
Every operation is sequentially consistent (``__ATOMIC_SEQ_CST``), as ``Atomics`` is.
See docs/protocol.md, "Atomic words".
"""
import ctypes
import ctypes.util
import os
import platform

_SEQ_CST = 5


def _load_libatomic():
    # PyDLL, not CDLL: these calls never block, so they keep the GIL rather than pay for
    # releasing and taking it back around each one (most of a call's cost).
    for name in ("libatomic.so.1", ctypes.util.find_library("atomic")):
        if not name:
            continue
        try:
            return ctypes.PyDLL(name)
        except OSError:
            continue
    raise ImportError(
        "tensorproc needs libatomic (GCC's atomic library) for the compare-and-swap on shared "
        "reference counts: install it (Debian/Ubuntu: apt-get install libatomic1)."
    )


_lib = _load_libatomic()
_c_i32 = ctypes.c_int32
_u32p = ctypes.c_void_p
_cas = _lib.__atomic_compare_exchange_4
_cas.argtypes = [_u32p, ctypes.POINTER(ctypes.c_int32), ctypes.c_int32, ctypes.c_int, ctypes.c_int]
_cas.restype = ctypes.c_bool
_add = _lib.__atomic_fetch_add_4
_add.argtypes = [_u32p, ctypes.c_int32, ctypes.c_int]
_add.restype = ctypes.c_int32
_sub = _lib.__atomic_fetch_sub_4
_sub.argtypes = [_u32p, ctypes.c_int32, ctypes.c_int]
_sub.restype = ctypes.c_int32
_xchg = _lib.__atomic_exchange_4
_xchg.argtypes = [_u32p, ctypes.c_int32, ctypes.c_int]
_xchg.restype = ctypes.c_int32
_load = _lib.__atomic_load_4
_load.argtypes = [_u32p, ctypes.c_int]
_load.restype = ctypes.c_int32
_store = _lib.__atomic_store_4
_store.argtypes = [_u32p, ctypes.c_int32, ctypes.c_int]
_store.restype = None


# The hot path's forms (a message's get, adopt and release; see NOTE [Hot words] in
# _header.py): the same libatomic functions without argtypes, called with a ctypes.c_void_p
# made once per word. ctypes converting an int address through argtypes, and a Python
# function around each call, cost more than the atomic instruction itself.
#   add_at(ptr, value, SEQ_CST) -> old value; sub_at likewise; cas(ptr, expected, desired) -> bool
SEQ_CST = _SEQ_CST
_raw = ctypes.PyDLL(_lib._name)  # a second handle: ctypes keeps one function object per name and library
add_at = _raw.__atomic_fetch_add_4
add_at.restype = ctypes.c_int32
sub_at = _raw.__atomic_fetch_sub_4
sub_at.restype = ctypes.c_int32
_cas_at = _raw.__atomic_compare_exchange_4
_cas_at.restype = ctypes.c_bool
_byref = ctypes.byref


def cas(ptr, expected, desired):
    """Compare-and-swap at the c_void_p `ptr`: True if the word was `expected` (now `desired`).
    A fresh cell for `expected` per call: a shared one would be overwritten by a finalizer or a
    thread releasing a storage between our store into it and the call."""
    return _cas_at(ptr, _byref(_c_i32(expected)), desired, _SEQ_CST, _SEQ_CST)


def ptr(addr):
    return ctypes.c_void_p(addr)


if platform.machine() in ("x86_64", "AMD64"):
    _c_int32 = ctypes.c_int32

    def load(addr):
        # x86-64 is TSO: an aligned 32-bit plain load is what a sequentially consistent load
        # compiles to (a mov), and needs no foreign call.
        return _c_int32.from_address(addr).value

    def words(addr, n):
        """The `n` int32 words at `addr`, loaded by indexing (w[i]): a memoryview, whose aligned
        4-byte read is the same plain load, without a ctypes object per read."""
        return memoryview((ctypes.c_int32 * n).from_address(addr)).cast("B").cast("i")

else:

    def load(addr):
        return _load(addr, _SEQ_CST)

    class _Words:
        __slots__ = ("addr",)

        def __init__(self, addr):
            self.addr = addr

        def __getitem__(self, i):
            return _load(self.addr + 4 * i, _SEQ_CST)

    def words(addr, n):
        """The `n` int32 words at `addr`, loaded by indexing (w[i]): elsewhere than x86-64 a
        plain load is not sequentially consistent, so each read is libatomic's."""
        return _Words(addr)


def store(addr, value):
    _store(addr, value, _SEQ_CST)


def add(addr, value):
    """Adds `value`; returns the word's old value (as Atomics.add)."""
    return _add(addr, value, _SEQ_CST)


def sub(addr, value):
    """Subtracts `value`; returns the word's old value (as Atomics.sub)."""
    return _sub(addr, value, _SEQ_CST)


def exchange(addr, value):
    return _xchg(addr, value, _SEQ_CST)


def compare_exchange(addr, expected, desired):
    """Sets the word to `desired` if it is `expected`; returns the value seen (as Atomics.compareExchange)."""
    seen = _c_i32(expected)
    _cas(addr, seen, desired, _SEQ_CST, _SEQ_CST)  # passed by reference (argtypes)
    return seen.value


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())
_FUTEX_WAIT = 0
_FUTEX_WAKE = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def futex_wake(addr, count=0x7FFFFFFF):
    """Wakes up to `count` waiters on the word (a shared futex: waiters in any process)."""
    if _SYS_FUTEX is None:
        return 0
    return _syscall(_SYS_FUTEX, ctypes.c_void_p(addr), _FUTEX_WAKE, count, None, None, 0)


def futex_wait(addr, expected, timeout_s):
    """Sleeps while the word is `expected`, at most `timeout_s` seconds (None: no limit)."""
    if _SYS_FUTEX is None:
        import time

        time.sleep(min(timeout_s or 0.001, 0.001))
        return
    ts = None
    if timeout_s is not None:
        ts = _Timespec(int(timeout_s), int((timeout_s - int(timeout_s)) * 1e9))
        ts = ctypes.byref(ts)
    _syscall(_SYS_FUTEX, ctypes.c_void_p(addr), _FUTEX_WAIT, ctypes.c_int32(expected), ts, None, 0)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
