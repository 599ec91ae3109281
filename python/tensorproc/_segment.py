"""Shared segments in this Python process: mapping received ones, the registry of our own (made
and recycled in _own.py), and the leases (one per storage) whose end gives a reference back
(docs/protocol.md, "Claiming and releasing a reference"). Single-threaded use per process is
assumed for the bookkeeping here (a lock guards it against the garbage collector's finalizers)."""
import ctypes
import errno
import os
import stat
import threading
import time
import weakref

from ._header import HEADER_BYTES, Header, W_REFS, W_UNWITNESSED
from ._manager import client as manager
from . import _atomic as A

_libc = ctypes.CDLL(None, use_errno=True)
_mmap = _libc.mmap
_mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_mmap.restype = ctypes.c_void_p
_munmap = _libc.munmap
_munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_PROT_RW = 3
_MAP_SHARED = 1
_MAP_FAILED = ctypes.c_void_p(-1).value
F_ADD_SEALS = 1033
F_GET_SEALS = 1034
F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW = 1, 2, 4
SHM_PREFIX = "tensorproc_"

_lock = threading.RLock()
PID = os.getpid()
_monotonic = time.monotonic
_wref = weakref.ref
_add_at, _SEQ_CST = A.add_at, A.SEQ_CST


class BadHandleError(ValueError):
    code = "ERR_TP_BAD_HANDLE"


def _map(fd, size):
    addr = _mmap(None, size, _PROT_RW, _MAP_SHARED, fd, 0)
    if addr is None or addr == _MAP_FAILED:
        e = ctypes.get_errno()
        raise OSError(e, "mmap: " + os.strerror(e))
    return addr


class Segment:
    """One mapping of a shared segment in this process."""

    def __init__(self, strategy, name, key, addr, size, fd, owned):
        self.strategy = strategy
        self.name = name  # file_system name, else None
        self.key = key
        self.addr = addr
        self.size = size
        self.capacity = size - HEADER_BYTES
        self.fd = fd  # kept memfd descriptor (file_descriptor), else None
        self.owned = owned
        self.header = Header(addr)
        self.data = addr + HEADER_BYTES
        self.slot = -2
        self.slot_at = None  # the slot's count word as a ctypes pointer (NOTE [Hot words])
        self.holds = 0  # live leases of this process: a hold in the header while > 0 (received)
        self.buffers = 0  # buffer objects alive over the mapping: it is unmapped only at 0
        self.pieces = {}  # offset -> weakref of a live Storage
        self.idle_since = time.monotonic()
        self.unmapped = False

    def own_slot(self):
        if self.slot == -2:
            self.set_slot(self.header.claim_slot(PID))
        return self.slot

    def set_slot(self, slot):
        """Our slot's count word (-1: none free), and its pointer with it, always together."""
        self.slot = slot
        self.slot_at = A.ptr(self.addr + 4 * slot) if slot >= 0 else None

    def release_in_flight(self):
        self._drop_total()

    def unref(self):
        if self.slot == -2:
            self.own_slot()
        return self._unlink_if_free(self.header.release(self.slot, self.slot_at))

    def _drop_total(self):
        return self._unlink_if_free(self.header.drop_total())

    def _unlink_if_free(self, left):
        if left == 0 and self.name is not None:
            try:
                os.unlink("/dev/shm" + self.name)
            except OSError:
                pass
        return left

    def refs(self):
        return self.header.load(W_REFS)

    def unmap(self):
        if self.unmapped:
            return
        self.unmapped = True
        _munmap(self.addr, self.size)
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.name is not None:
            manager.drop(self.name)
        _segments.pop(self.key, None)


# Every segment this process maps, by key ("fs:<name>" or "fd:<dev>:<ino>").
_segments = {}
# Received segments no storage of this process uses now, kept mapped for the next message.
_parked = {}
PARK_MAX = 256
PARK_DECAY_S = 5.0
_last_decay = [0.0]


def _fd_key(st):
    return "fd:%d:%d" % (st.st_dev, st.st_ino)


def _check_magic(seg):
    if not seg.header.valid():
        seg.unmap()
        raise BadHandleError("A received segment has no tensorproc header: the handle is corrupt or not from tensorproc.")


def _open_fd(fd, key, size, end):
    seals = __import__("fcntl").fcntl(fd, F_GET_SEALS)
    if seals < 0 or not (seals & F_SEAL_SHRINK):
        raise BadHandleError("A received descriptor is not a sealed tensorproc memfd: it was refused.")
    if size < HEADER_BYTES + end:
        raise BadHandleError("A handle claims bytes up to %d of a segment of %d." % (end, size - HEADER_BYTES))
    seg = Segment("file_descriptor", None, key, _map(fd, size), size, fd, False)
    _check_magic(seg)
    return seg


def _open_name(name, end):
    if not name.startswith("/" + SHM_PREFIX) or "/" in name[1:] or "\0" in name:
        raise BadHandleError("%r is not a tensorproc segment name." % name)
    fd = os.open("/dev/shm" + name, os.O_RDWR | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise BadHandleError("%s is not a segment of this user." % name)
        if st.st_size < HEADER_BYTES + end:
            raise BadHandleError("A handle claims bytes up to %d of a segment of %d." % (end, st.st_size - HEADER_BYTES))
        manager.hold(name)
        seg = Segment("file_system", name, "fs:" + name, _map(fd, st.st_size), st.st_size, None, False)
    finally:
        os.close(fd)
    _check_magic(seg)
    return seg


def import_handle(strategy, name, offset, nbytes, fd):
    """The Storage for a received handle: adopts the reference the sender added; takes `fd`."""
    with _lock:
        if _parked and _monotonic() - _last_decay[0] >= 0.5:
            # _decay()'s own test, without the call per message: the bound on _parked is kept
            # where segments are parked (_release), so here only the clock can make it work
            _decay()
        end = offset + nbytes
        witness = None
        try:
            if strategy == "file_system":
                # `fd` is the message's witness (protocol.md, "Witnesses"): closed only once the
                # reference is adopted or released, below, never before.
                witness, fd = fd, None
                if not isinstance(name, str):
                    raise BadHandleError("A file_system handle arrived without a segment name.")
                key = "fs:" + name
                seg = _segments.get(key)
            else:
                if fd is None:
                    raise BadHandleError("A file_descriptor handle arrived without its descriptor.")
                # The sender's identity hint finds a mapping we have without an fstat (protocol.md,
                # "Storage handles"); none found: the descriptor's own identity decides.
                seg = _segments.get(name) if name is not None and name.startswith("fd:") else None
                if seg is None:
                    st = os.fstat(fd)
                    key = _fd_key(st)
                    seg = _segments.get(key)
                else:
                    key = seg.key
            if seg is not None and (seg.holds > 0 or seg.owned):
                # held already: the message's reference is not needed (dropped before the descriptor is closed)
                seg.release_in_flight()
                if fd is not None:
                    _bin(fd)
                    fd = None
                if end > seg.capacity:
                    raise BadHandleError("A handle claims bytes %d to %d of a segment of %d." % (offset, end, seg.capacity))
                existing = seg.pieces.get(offset)
                s = existing() if existing is not None else None
                if s is not None and not s.released and s.nbytes >= nbytes:
                    return s
                return _lease(seg, offset, nbytes)
            if seg is None:
                seg = _open_name(name, end) if strategy == "file_system" else _open_fd(fd, key, st.st_size, end)
                fd = None
                _segments[key] = seg
            else:
                _parked.pop(key, None)
                if end > seg.capacity:
                    seg.release_in_flight()
                    raise BadHandleError("A handle claims bytes %d to %d of a segment of %d." % (offset, end, seg.capacity))
            # the reference becomes our hold, recorded in our slot (one add, on the slot's pointer:
            # NOTE [Hot words]), then the descriptor may go
            if seg.slot == -2:
                seg.own_slot()
            if seg.slot >= 0:
                _add_at(seg.slot_at, 1, _SEQ_CST)
            if fd is not None:
                if seg.fd is None:
                    seg.fd = fd
                else:
                    _bin(fd)
                fd = None
            return _lease(seg, offset, nbytes)
        finally:
            if fd is not None:
                os.close(fd)
            if witness is not None:
                _bin(witness)


# NOTE [Descriptor bin]
# A message's descriptor (the memfd of a segment we map already, or a file_system message's
# witness) is closed once its reference is adopted or released: a close() per message, on top
# of the recvmsg that installed it, about 2 us of the 12 a Python consumer spent on a 1 KiB
# tensor. Closed later it is no less correct (protocol.md, "Witnesses": keeping it longer only
# delays the owner's taking back of references lost in flight, never frees anything early; a
# memfd's description stays open anyway while we keep the mapping's own descriptor). So it goes
# into this bin, closed as a whole (one close_range when the kernel numbered them in a row, as
# it does from the lowest free slot up) when it holds BIN_SIZE, whenever a receive finds its
# channel empty (_channels.py: before any wait, so a consumer with nothing to do holds none),
# at _decay()'s looks (twice a second while segments come and go) and at exit. What it costs: a
# process that stops calling get() for a while keeps up to BIN_SIZE - 1 of them open as long.
BIN_SIZE = 32
_binned = []


def _bin(fd):
    _binned.append(fd)
    if len(_binned) >= BIN_SIZE:
        close_binned()


def close_binned():
    """Closes the descriptors in the bin (NOTE [Descriptor bin])."""
    with _lock:
        if not _binned:
            return
        fds = _binned[:]
        del _binned[:]
    lo, hi = min(fds), max(fds)
    if hi - lo == len(fds) - 1:  # all of them, and only them (each number is one of ours)
        os.closerange(lo, hi + 1)
        return
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class Storage:
    """A piece of a segment this process uses: the owner of the buffer arrays lie over."""

    __slots__ = ("seg", "offset", "nbytes", "_buffer", "_new", "released", "__weakref__")

    def __init__(self, seg, offset, nbytes):
        self.seg = seg
        self.offset = offset
        self.nbytes = nbytes
        self.released = False
        n = nbytes if nbytes > 0 else 1
        kind = _buffer_types.get(n) or _buffer_type(n)
        buf = kind.from_address(seg.data + offset)
        buf._storage = self  # the buffer keeps the storage (and its segment) alive
        self._buffer = _wref(buf)
        self._new = buf  # kept until the first array is made over it (buffer())

    def buffer(self):
        """The bytes object arrays lie over (alive while any array over it is)."""
        buf = self._new
        if buf is not None:
            self._new = None
            return buf
        return self._buffer()

    @property
    def addr(self):
        return self.seg.data + self.offset

    def release(self):
        """Drops this process's hold now (the memory stays mapped until no array uses it)."""
        with _lock:
            _release(self)


def _release(storage):
    """Storage.release under _lock: the piece forgotten, and the hold given back with the last one."""
    if storage.released:
        return
    storage.released = True
    seg = storage.seg
    ref = seg.pieces.get(storage.offset)
    if ref is not None and ref() is storage:
        del seg.pieces[storage.offset]
    seg.holds -= 1
    if seg.holds == 0:
        seg.idle_since = now = _monotonic()
        if not seg.owned:
            seg.unref()
            _parked[seg.key] = seg
            if len(_parked) > PARK_MAX or now - _last_decay[0] >= 0.5:
                _decay(now)


_exited = [False]


def _gone(buf):
    # The buffer's __del__, not a weakref.finalize per buffer (a registry entry, a weak
    # reference and a callback object per message): when the last array over it is collected,
    # its storage is released, at the same moment and with the same effect. One function, not
    # a chain of them: it runs once per message received.
    storage = buf.__dict__.get("_storage")
    if storage is None or _exited[0]:  # after release_all, which gave every hold back
        return
    seg = storage.seg
    with _lock:
        if not storage.released:
            _release(storage)
        seg.buffers -= 1
        if seg.buffers == 0 and not seg.owned and seg.holds == 0 and seg.key not in _parked:
            seg.unmap()


# nbytes -> a ctypes array class with the release hook, made once per size
_buffer_types = {}


def _buffer_type(n):
    kind = type("SharedBytes", (ctypes.c_uint8 * n,), {"__del__": _gone})
    if len(_buffer_types) >= 1024:
        _buffer_types.clear()
    _buffer_types[n] = kind
    return kind


def _lease(seg, offset, nbytes):
    s = Storage(seg, offset, nbytes)
    seg.holds += 1
    seg.buffers += 1
    seg.pieces[offset] = _wref(s)
    return s


def _decay(now=None):
    """Unmaps parked segments past the bound or idle for PARK_DECAY_S, once no array uses them."""
    if not _parked:
        return
    if now is None:
        now = _monotonic()
    over = len(_parked) - PARK_MAX
    if over <= 0 and now - _last_decay[0] < 0.5:
        return  # looked at twice a second, or when over the bound
    _last_decay[0] = now
    close_binned()
    for key, seg in list(_parked.items()):
        if seg.holds > 0:
            _parked.pop(key, None)
            continue
        if over > 0 or now - seg.idle_since > PARK_DECAY_S:
            over -= 1
            del _parked[key]
            if seg.buffers == 0:
                seg.unmap()


def storage_of(addr, nbytes):
    """The live storage of this process that holds [addr, addr + nbytes), or None."""
    with _lock:
        for seg in _segments.values():
            if seg.unmapped or not (seg.data <= addr and addr + nbytes <= seg.data + seg.capacity):
                continue
            for ref in list(seg.pieces.values()):
                s = ref()
                if s is not None and not s.released and s.addr <= addr and addr + nbytes <= s.addr + s.nbytes:
                    return s
        return None


# ---- segments of our own (made in _own.py) and sending storages on ---------------------------

_free = {}  # (strategy, capacity) -> [Segment] owned, possibly free (_own.allocate)


def export(storage):
    """Adds the receiver's reference (in flight); returns (strategy, name, fd)."""
    seg = storage.seg
    with _lock:
        if seg.strategy == "file_descriptor" and seg.fd is None:
            raise BadHandleError("this segment's descriptor is gone; it cannot be sent on")
        if seg.strategy == "file_system" and not seg.owned and seg.header.load(W_UNWITNESSED) == 0:
            # Passed on without the owner's witness: marked before the reference is added, so that
            # the owner never takes it back as lost in flight (protocol.md, "Witnesses").
            seg.header.store(W_UNWITNESSED, 1)
        seg.header.retain()
    if seg.strategy == "file_system":
        return seg.strategy, seg.name, None
    return seg.strategy, seg.key, seg.fd


def abandon(storage):
    storage.seg.release_in_flight()


def release_all():
    """At exit: gives back every hold and our own segments (their names go when unused)."""
    close_binned()
    with _lock:
        _exited[0] = True
        for lst in _free.values():
            for seg in lst:
                if not seg.unmapped:
                    seg.unref()
        for seg in list(_segments.values()):
            if not seg.owned and seg.holds > 0:
                seg.holds = 0
                seg.unref()
        # Mappings stay: arrays may still be read while the interpreter ends; the kernel unmaps.
