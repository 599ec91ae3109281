"""Shared segments in this Python process: mapping received ones, making and recycling our own,
and the leases (one per storage) whose end gives a reference back (docs/protocol.md,
"Claiming and releasing a reference"). Single-threaded use per process is assumed for the
bookkeeping here (a lock guards it against the garbage collector's finalizers)."""
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
        self.slot = -2
        self.holds = 0  # live leases of this process: a hold in the header while > 0 (received)
        self.buffers = 0  # buffer objects alive over the mapping: it is unmapped only at 0
        self.pieces = {}  # offset -> weakref of a live Storage
        self.idle_since = time.monotonic()
        self.unmapped = False

    @property
    def data(self):
        return self.addr + HEADER_BYTES

    def own_slot(self):
        if self.slot == -2:
            self.slot = self.header.claim_slot(PID)
        return self.slot

    def adopt(self):
        self.header.adopt(self.own_slot())

    def release_in_flight(self):
        self._drop_total()

    def unref(self):
        self.header.lower_slot(self.own_slot())  # the slot first, then the total: see protocol.md
        return self._drop_total()

    def _drop_total(self):
        left = self.header.drop_total()
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
                    os.close(fd)
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
            seg.adopt()  # the reference becomes our hold, then the descriptor may go
            if fd is not None:
                if seg.fd is None:
                    seg.fd = fd
                else:
                    os.close(fd)
                fd = None
            return _lease(seg, offset, nbytes)
        finally:
            if fd is not None:
                os.close(fd)
            if witness is not None:
                os.close(witness)


class Storage:
    """A piece of a segment this process uses: the owner of the buffer arrays lie over."""

    __slots__ = ("seg", "offset", "nbytes", "_buffer", "_new", "released", "__weakref__")

    def __init__(self, seg, offset, nbytes):
        self.seg = seg
        self.offset = offset
        self.nbytes = nbytes
        self.released = False
        buf = _Buffer.make(max(nbytes, 1), seg.data + offset)
        buf._storage = self  # the buffer keeps the storage (and its segment) alive
        self._buffer = weakref.ref(buf)
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
            if self.released:
                return
            self.released = True
            seg = self.seg
            if seg.pieces.get(self.offset) is not None and seg.pieces[self.offset]() is self:
                del seg.pieces[self.offset]
            seg.holds -= 1
            if seg.holds == 0:
                seg.idle_since = time.monotonic()
                if not seg.owned:
                    seg.unref()
                    _parked[seg.key] = seg
                    _decay()


_exited = [False]


def _gone(buf):
    # The buffer's __del__, not a weakref.finalize per buffer (a registry entry, a weak
    # reference and a callback object per message): when the last array over it is collected,
    # its storage is released, at the same moment and with the same effect.
    storage = buf.__dict__.get("_storage")
    if storage is not None and not _exited[0]:  # after release_all, which gave every hold back
        _buffer_gone(storage.seg, storage)


class _Buffer:
    _types = {}  # nbytes -> a ctypes array class with the release hook, made once per size

    @classmethod
    def make(cls, n, addr):
        sub = cls._types.get(n)
        if sub is None:
            sub = type("SharedBytes", (ctypes.c_uint8 * n,), {"__del__": _gone})
            if len(cls._types) >= 1024:
                cls._types.clear()
            cls._types[n] = sub
        return sub.from_address(addr)


def _buffer_gone(seg, storage):
    with _lock:
        storage.release()
        seg.buffers -= 1
        if seg.buffers == 0 and not seg.owned and seg.holds == 0 and seg.key not in _parked:
            seg.unmap()


def _lease(seg, offset, nbytes):
    s = Storage(seg, offset, nbytes)
    seg.holds += 1
    seg.buffers += 1
    seg.pieces[offset] = weakref.ref(s)
    return s


def _decay():
    """Unmaps parked segments past the bound or idle for PARK_DECAY_S, once no array uses them."""
    if not _parked:
        return
    now = time.monotonic()
    over = len(_parked) - PARK_MAX
    if over <= 0 and now - _last_decay[0] < 0.5:
        return  # looked at twice a second, or when over the bound
    _last_decay[0] = now
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


# ---- segments of our own -------------------------------------------------------------------

_free = {}  # capacity -> [Segment] owned, possibly free
CACHE_MAX_BYTES = 1 << 30


def _size_class(n):
    c = 4096
    while c < n:
        c *= 2
    return c


def _create(strategy, capacity):
    size = HEADER_BYTES + capacity
    if strategy == "file_system":
        name = "/%s%d_%s" % (SHM_PREFIX, PID, os.urandom(8).hex())
        manager.hold(name)  # told before the name exists (protocol.md: the file_system manager)
        try:
            fd = os.open("/dev/shm" + name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError:
            manager.drop(name)
            raise
        try:
            os.posix_fallocate(fd, 0, size)
            addr = _map(fd, size)
        except OSError:
            os.close(fd)
            os.unlink("/dev/shm" + name)
            manager.drop(name)
            raise
        os.close(fd)
        seg = Segment(strategy, name, "fs:" + name, addr, size, None, True)
    else:
        fd = os.memfd_create("tensorproc", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.posix_fallocate(fd, 0, size)
            __import__("fcntl").fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
            addr = _map(fd, size)
        except OSError:
            os.close(fd)
            raise
        seg = Segment(strategy, None, _fd_key(os.fstat(fd)), addr, size, fd, True)
    seg.slot = seg.header.init(PID, capacity)
    _segments[seg.key] = seg
    return seg


def _reclaim_dead(seg):
    for pid, _count in seg.header.holders():
        if pid != PID and not A.pid_alive(pid):
            seg.header.reclaim_slots(pid)


def allocate(strategy, nbytes):
    """A new Storage of `nbytes` in a segment of our own, recycled when one is free."""
    cap = _size_class(nbytes)
    with _lock:
        _decay()
        lst = _free.setdefault((strategy, cap), [])
        for seg in lst:
            if seg.buffers != 0 or seg.holds != 0:
                continue
            if seg.refs() != 1:
                _reclaim_dead(seg)
                if seg.refs() != 1:
                    continue
            return _lease(seg, 0, nbytes)
        _trim()
        seg = _create(strategy, cap)
        lst.append(seg)
        return _lease(seg, 0, nbytes)


def _trim():
    total = sum(s.size for lst in _free.values() for s in lst)
    if total < CACHE_MAX_BYTES:
        return
    for lst in _free.values():
        for seg in list(lst):
            if seg.buffers == 0 and seg.holds == 0:
                lst.remove(seg)
                seg.unref()
                seg.unmap()


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
