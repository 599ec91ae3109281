"""Segments of this process's own: made for what it sends, kept by size class and recycled once
every reference but ours is back (DESIGN.md, idea 1). Their bookkeeping is _segment.py's (the
same lock, registry and leases as received segments)."""
import os

from ._header import HEADER_BYTES
from ._manager import client as manager
from . import _atomic as A
from . import _segment as S
from ._segment import PID, SHM_PREFIX, F_ADD_SEALS, F_SEAL_GROW, F_SEAL_SEAL, F_SEAL_SHRINK, Segment, _fd_key, _lease, _lock, _map

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
    seg.set_slot(seg.header.init(PID, capacity))
    S._segments[seg.key] = seg
    return seg


def _reclaim_dead(seg):
    for pid, _count in seg.header.holders():
        if pid != PID and not A.pid_alive(pid):
            seg.header.reclaim_slots(pid)


def allocate(strategy, nbytes):
    """A new Storage of `nbytes` in a segment of our own, recycled when one is free."""
    cap = _size_class(nbytes)
    with _lock:
        S._decay()
        lst = S._free.setdefault((strategy, cap), [])
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
    total = sum(s.size for lst in S._free.values() for s in lst)
    if total < CACHE_MAX_BYTES:
        return
    for lst in S._free.values():
        for seg in list(lst):
            if seg.buffers == 0 and seg.holds == 0:
                lst.remove(seg)
                seg.unref()
                seg.unmap()
