"""VALUE and SPILL frames (docs/protocol.md, "VALUE and SPILL"): V8's serializer format (the
subset of _v8.py) of a table of reductions and the root; a SPILL is a VALUE frame read from a
shared storage that travels in its place. Mirrors src/transport/frame-decode.ts and spill.ts."""
import ctypes
import os
import struct

from . import _frames as F
from . import _segment as S
from ._v8 import Reader, UnsupportedValueError


class UnsupportedObjectError(UnsupportedValueError):
    """A VALUE frame's table holds a tensorproc object other than a tensor (a Queue, a Lock…)."""

    def __init__(self, name):
        self.tag = None
        self.reduction = name
        F.FrameDecodeError.__init__(
            self,
            "A received message holds a tensorproc object of type %r, which the Python peer does not rebuild "
            "(it rebuilds tensors): attach the object by its name instead." % str(name)[:80])


def decode_spill(data, fds):
    """The value of a SPILL frame; takes its descriptors (the entries of `fds` it takes become None)."""
    if len(data) < 16:
        raise F.FrameDecodeError("A received message is truncated.")
    strat, nlen = data[2], data[3]
    (length,) = struct.unpack_from("<I", data, 4)
    (nbytes,) = struct.unpack_from("<d", data, 8)
    if strat > 1 or 16 + nlen > len(data) or nbytes != int(nbytes) or nbytes < 0:
        raise F.FrameDecodeError("A received spilled message has a malformed header.")
    name = bytes(data[16:16 + nlen]).decode("latin1") if nlen else None
    fd = None
    if F.STRATEGIES[strat] == "file_descriptor":
        if not fds or fds[-1] is None:
            raise F.FrameDecodeError("A received spilled message came without its descriptor.")
        fd, fds[-1] = fds[-1], None
    storage = S.import_handle(F.STRATEGIES[strat], name, 0, int(nbytes), fd)
    buf = storage.buffer()
    try:
        if length > storage.nbytes:
            raise F.FrameDecodeError("A spilled message claims %d bytes of a %d-byte storage." % (length, storage.nbytes))
        # One copy out, so that the storage goes back to its owner before anything is rebuilt.
        inner = ctypes.string_at(storage.addr, length)
    finally:
        storage.release()
        del buf
    if len(inner) < 2 or inner[1] != F.FRAME_VERSION or inner[0] != F.KIND_VALUE:
        raise F.FrameDecodeError("A received spilled message does not hold a VALUE frame of version %d." % F.FRAME_VERSION)
    return decode_value(inner, fds)


def decode_value(data, fds):
    """The value of a VALUE frame; takes its descriptors (the entries of `fds` it takes become None)."""
    r = Reader(data, 2)
    r.header()
    n = r.varint()
    if n > len(data):
        raise F.FrameDecodeError("A received message claims %d objects in %d bytes." % (n, len(data)))
    table = []
    for _ in range(n):
        name = r.value()
        table.append((name, r.value()))
    objects = _rebuild(table, fds)

    def host(k):
        if k >= len(objects):
            raise F.FrameDecodeError("A message refers to object %d of a table of %d." % (k, len(objects)))
        return objects[k]

    r.host = host
    try:
        return r.value()
    except BaseException:
        for o in objects:  # given back now, not when the traceback goes
            if isinstance(o, S.Storage):
                o.release()
        raise


def _rebuild(table, fds):
    """Storages first (each adopts its reference, so that none stays in flight), then tensors;
    anything else fails once every storage is imported (and then released)."""
    uses = {}
    for name, state in table:
        if name == "storage" and isinstance(state, list) and len(state) == 5 and state[0] == "file_descriptor":
            uses[state[4]] = uses.get(state[4], 0) + 1
    objects = [None] * len(table)
    failure = None
    for k, (name, state) in enumerate(table):
        if name != "storage":
            continue
        try:
            objects[k] = _storage(state, fds, uses)
        except Exception as e:  # the others are imported all the same
            failure = failure or e
    for k, (name, state) in enumerate(table):
        if failure is not None:
            break
        if name == "tensor":
            try:
                objects[k] = _tensor(state, objects)
            except Exception as e:
                failure = e
        elif name != "storage":
            failure = UnsupportedObjectError(name)
    if failure is not None:
        for o in objects:
            if isinstance(o, S.Storage):
                o.release()
        raise failure
    return objects


def _storage(state, fds, uses):
    if not isinstance(state, list) or len(state) != 5:
        if isinstance(state, list) and state and state[0] == "cuda":
            raise UnsupportedObjectError("cuda storage")
        raise F.FrameDecodeError("A received storage entry is malformed.")
    strat, name, offset, nbytes, fdi = state
    offset, nbytes = _natural(offset), _natural(nbytes)  # past 2^30, V8 writes numbers as doubles
    if strat not in F.STRATEGIES or offset is None or nbytes is None or (name is not None and not isinstance(name, str)):
        raise F.FrameDecodeError("A received storage entry is malformed.")
    fd = None
    if strat == "file_descriptor":
        if not isinstance(fdi, int) or not 0 <= fdi < len(fds):
            raise F.FrameDecodeError("A message refers to descriptor %r but carries %d." % (fdi, len(fds)))
        if uses.get(fdi, 0) > 1:  # pieces of one slab share a descriptor: each import takes its own
            uses[fdi] -= 1
            fd = os.dup(fds[fdi])
        else:
            fd, fds[fdi] = fds[fdi], None
            if fd is None:
                raise F.FrameDecodeError("A message uses descriptor %d twice." % fdi)
    return S.import_handle(strat, name, offset, nbytes, fd)


def _tensor(state, objects):
    if not isinstance(state, list) or len(state) != 5:
        raise F.FrameDecodeError("A received tensor entry is malformed.")
    index, dtype, shape, stride, offset = state
    if not isinstance(index, int) or not 0 <= index < len(objects) or not isinstance(objects[index], S.Storage):
        raise F.FrameDecodeError("A received tensor does not refer to a storage.")
    if dtype not in F.DTYPES or not isinstance(shape, list) or not isinstance(stride, list) or len(shape) != len(stride):
        raise F.FrameDecodeError("A received tensor has an invalid dtype, shape or stride.")
    if len(shape) > F.MAX_NDIM:
        raise F.FrameDecodeError("A received tensor claims %d dimensions." % len(shape))
    return F._array(objects[index], F.DTYPES.index(dtype), shape, stride, offset)


def _natural(v):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v < 0 or v != int(v) or v > 2**53:
        return None
    return int(v)
