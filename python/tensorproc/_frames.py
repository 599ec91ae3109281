"""Frames (docs/protocol.md, "Frames"): TENSOR and PLAIN frames, encoded and decoded; numpy
arrays over shared storages. Mirrors src/transport/frame-*.ts and plain-*.ts."""
import os
import struct

import numpy as np

from . import _own as O
from . import _plans as P
from . import _segment as S

FRAME_VERSION = 2
KIND_VALUE, KIND_TENSOR, KIND_SPILL, KIND_PLAIN = 1, 2, 3, 4
INLINE_MAX = 64 * 1024
MAX_FRAME = INLINE_MAX + 1024
MAX_FDS = 253
MAX_NDIM = 64
PIECE_ALIGN = 64
MAX_NODES, MAX_DEPTH, MAX_ITEMS = 256, 32, 1024
NO_FD = 0xFFFF
STRATEGIES = ("file_descriptor", "file_system")
DTYPES = ("float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
          "int64", "uint64", "bool", "float16", "bfloat16")
BFLOAT16 = np.dtype("<u2", metadata={"tensorproc": "bfloat16"})
NP_DTYPES = [np.dtype(d).newbyteorder("<") if d != "bool" else np.dtype(np.bool_) for d in DTYPES[:-1]] + [BFLOAT16]
_CODE = {np.dtype(d).str: i for i, d in enumerate(DTYPES[:-1])}
_CODE[np.dtype(np.bool_).str] = 10
T_UNDEFINED, T_NULL, T_FALSE, T_TRUE, T_INT, T_FLOAT, T_STRING, T_ARRAY, T_OBJECT, T_TENSOR = range(10)


class FrameDecodeError(ValueError):
    code = "ERR_TP_FRAME_DECODE"


class NotTransferableError(TypeError):
    code = "ERR_TP_NOT_TRANSFERABLE"


def dtype_code(dt):
    if dt.metadata and dt.metadata.get("tensorproc") == "bfloat16":
        return 12
    code = _CODE.get(dt.str)
    if code is None:
        raise NotTransferableError(
            "numpy dtype %s has no tensorproc dtype (it has: %s)" % (dt, ", ".join(DTYPES)))
    return code


def dtype_of(name):
    """The numpy dtype a tensorproc dtype name arrives as (bfloat16: uint16 words, tagged)."""
    try:
        return NP_DTYPES[DTYPES.index(name)]
    except ValueError:
        raise TypeError("unknown dtype %r: one of %s" % (name, ", ".join(DTYPES))) from None


# ---- decoding -------------------------------------------------------------------------------

def _array(storage, code, shape, stride, offset):
    if len(shape) == 1 and code < len(DTYPES):
        # The common case (a 1-d tensor) without the general checks' lists and generators.
        n, st, off = shape[0], stride[0], offset
        dt = NP_DTYPES[code]
        size = dt.itemsize
        if n > 0 and st >= 0 and off >= 0 and n == int(n) and st == int(st) and off == int(off):
            n, st, off = int(n), int(st), int(off)
            if (off + (n - 1) * st + 1) * size > storage.nbytes:
                raise FrameDecodeError("A received tensor does not fit its storage: the message is corrupt.")
            return np.ndarray((n,), dt, buffer=storage.buffer(), offset=off * size, strides=(st * size,))
    if code >= len(DTYPES):
        raise FrameDecodeError("A received tensor has dtype code %d." % code)
    dt = NP_DTYPES[code]
    size = dt.itemsize
    for v in list(shape) + list(stride) + [offset]:
        if v < 0 or v != int(v):
            raise FrameDecodeError("A received tensor has a malformed layout.")
    shape = tuple(int(v) for v in shape)
    stride = tuple(int(v) * size for v in stride)
    offset = int(offset)
    numel = 1
    for n in shape:
        numel *= n
    if numel > 0 and (offset + sum((n - 1) * s // size for n, s in zip(shape, stride)) + 1) * size > storage.nbytes:
        raise FrameDecodeError("A received tensor does not fit its storage: the message is corrupt.")
    buf = storage.buffer()
    if numel == 0:
        return np.empty(shape, dt)
    return np.ndarray(shape, dt, buffer=buf, offset=offset * size, strides=stride)


def decode(data, fds):
    """The value of one received frame; takes every descriptor in `fds`."""
    plan = _plan_of(data) if type(data) is bytes else None  # NOTE [Frame plans]
    if plan is not None and type(fds) is list and len(fds) <= 1:
        return P.planned(plan, fds)
    fds = fds if type(fds) is list else list(fds)
    try:
        if len(data) < 2:
            raise FrameDecodeError("A received message is %d bytes long, too short for a frame." % len(data))
        if data[1] != FRAME_VERSION:
            raise FrameDecodeError("A received message has frame version %d, this tensorproc reads %d." % (data[1], FRAME_VERSION))
        kind = data[0]
        if kind == KIND_TENSOR:
            return _decode_tensor(data, fds)
        if kind == KIND_PLAIN:
            return _Plain(data, fds).decode()
        if kind == KIND_VALUE:
            from ._value import decode_value

            return decode_value(data, fds)
        if kind == KIND_SPILL:
            from ._value import decode_spill

            return decode_spill(data, fds)
        raise FrameDecodeError("A received message has an unknown frame kind %d." % kind)
    finally:
        for fd in fds:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass


_plan_of = P.plans.get
_TENSOR_HEAD = struct.Struct("<BBBBHdd")  # from byte 2: dtype, ndim, strategy, name length, piece, nbytes, offset
_ONE_DIM = struct.Struct("<dd")


def _decode_tensor(data, fds):
    if len(data) < 24:
        raise FrameDecodeError("A received tensor message is truncated.")
    code, ndim, strat, nlen, piece, nbytes, offset = _TENSOR_HEAD.unpack_from(data, 2)
    at = 24 + 16 * ndim
    if at + nlen > len(data) or strat > 1:
        raise FrameDecodeError("A received tensor message is truncated.")
    if ndim == 1:
        shape, stride = _ONE_DIM.unpack_from(data, 24)
        shape, stride = (shape,), (stride,)
    else:
        shape = struct.unpack_from("<%dd" % ndim, data, 24)
        stride = struct.unpack_from("<%dd" % ndim, data, 24 + 8 * ndim)
    name = bytes(data[at:at + nlen]).decode("latin1") if nlen else None
    fd = fds[0] if fds else None
    if fds:
        fds[0] = None
    handle = (STRATEGIES[strat], name, piece * PIECE_ALIGN, int(nbytes))
    storage = S.import_handle(*handle, fd)
    a = _array(storage, code, shape, stride, offset)
    P.remember(data, storage, a, handle)
    return a


class _Plain:
    def __init__(self, data, fds):
        self.d = data
        self.fds = fds
        self.storages = []

    def decode(self):
        d = self.d
        if len(d) < 6:
            raise FrameDecodeError("A received message is truncated.")
        (table,) = struct.unpack_from("<I", d, 2)
        if table < 6 or table > len(d):
            raise FrameDecodeError("A received message has a malformed table offset.")
        self.pos, self.end = table, len(d)
        (n,) = self._u("<H", 2)
        entries = []
        for _ in range(n):
            strat, nlen, fdi, nbytes, off = self._u("<BBHdI", 16)
            self._need(nlen)
            name = bytes(d[self.pos:self.pos + nlen]).decode("latin1") if nlen else None
            self.pos += nlen
            if strat > 1:
                raise FrameDecodeError("A received storage has strategy code %d." % strat)
            entries.append((STRATEGIES[strat], name, off, int(nbytes), fdi))
        failure = None
        for strat, name, off, nbytes, fdi in entries:
            fd = None
            if strat == "file_descriptor":
                if fdi >= len(self.fds) or self.fds[fdi] is None:
                    failure = failure or FrameDecodeError("A received storage refers to a missing descriptor.")
                    continue
                fd, self.fds[fdi] = self.fds[fdi], None
            try:
                self.storages.append(S.import_handle(strat, name, off, nbytes, fd))
            except Exception as e:  # the others are imported all the same (their references adopted)
                failure = failure or e
                self.storages.append(None)
        if failure is not None:
            raise failure
        self.pos, self.end = 6, table
        return self.read(0)

    def _need(self, n):
        if self.pos + n > self.end:
            raise FrameDecodeError("A received message is truncated.")

    def _u(self, fmt, n):
        self._need(n)
        v = struct.unpack_from(fmt, self.d, self.pos)
        self.pos += n
        return v

    def _str(self):
        (n,) = self._u("<I", 4)
        self._need(2 * n)
        s = bytes(self.d[self.pos:self.pos + 2 * n]).decode("utf-16-le", "surrogatepass")
        self.pos += 2 * n
        return s

    def read(self, depth):
        (tag,) = self._u("<B", 1)
        if tag in (T_UNDEFINED, T_NULL):
            return None
        if tag == T_FALSE:
            return False
        if tag == T_TRUE:
            return True
        if tag == T_INT:
            return self._u("<i", 4)[0]
        if tag == T_FLOAT:
            return self._u("<d", 8)[0]
        if tag == T_STRING:
            return self._str()
        if tag in (T_ARRAY, T_OBJECT):
            if depth >= MAX_DEPTH:
                raise FrameDecodeError("A received message nests too deep.")
            (n,) = self._u("<I", 4)
            if n > MAX_ITEMS:
                raise FrameDecodeError("A received message claims a container of %d entries." % n)
            if tag == T_ARRAY:
                return [self.read(depth + 1) for _ in range(n)]
            out = {}
            for _ in range(n):
                k = self._str()
                out[k] = self.read(depth + 1)
            return out
        if tag == T_TENSOR:
            code, ndim, index, offset = self._u("<BBHd", 12)
            if ndim > MAX_NDIM:
                raise FrameDecodeError("A received tensor claims %d dimensions." % ndim)
            shape = self._u("<%dd" % ndim, 8 * ndim)
            stride = self._u("<%dd" % ndim, 8 * ndim)
            if index >= len(self.storages):
                raise FrameDecodeError("A received tensor refers to storage %d of %d." % (index, len(self.storages)))
            return _array(self.storages[index], code, shape, stride, offset)
        raise FrameDecodeError("A received message holds a value of unknown tag %d." % tag)


# ---- encoding -------------------------------------------------------------------------------

class Frame:
    __slots__ = ("data", "fds", "exported", "keep")

    def __init__(self, data, fds, exported, keep=()):
        self.data = data
        self.fds = fds
        self.exported = exported
        self.keep = keep  # buffers of copies made for this frame: alive until it is sent

    def abandon(self):
        for s in self.exported:
            S.abandon(s)
        self.exported = []


def _torch():
    import sys

    return sys.modules.get("torch")


def _as_array(v):
    """(array, torch tensor or None) for a numpy array or a torch CPU tensor, else None."""
    if isinstance(v, np.ndarray):
        return v, None
    torch = _torch()
    if torch is not None and isinstance(v, torch.Tensor):
        if v.device.type != "cpu":
            raise NotTransferableError("a %s tensor cannot travel to Node: move it to the CPU first (.cpu())." % v.device)
        t = v.detach()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(BFLOAT16), v
        return t.numpy(), v
    return None


def place(arr, tensor=None, keep=None):
    """(storage, element offset, element strides) of `arr` in shared memory: where it lies if in
    a storage of this process, else a copy in a new one (a torch tensor is moved there in place)."""
    dt = arr.dtype
    size = dt.itemsize
    dtype_code(dt)
    if not dt.isnative and size > 1:
        raise NotTransferableError("a non-native byte order array cannot travel: use arr.astype(arr.dtype.newbyteorder('='))")
    ptr = arr.__array_interface__["data"][0]
    if arr.size > 0 and all(s >= 0 for s in arr.strides) and all(s % size == 0 for s in arr.strides):
        span = sum((n - 1) * s for n, s in zip(arr.shape, arr.strides)) + size
        s = S.storage_of(ptr, span)
        if s is not None and (ptr - s.addr) % size == 0:
            return s, (ptr - s.addr) // size, [st // size for st in arr.strides]
    storage = O.allocate(_strategy(), max(arr.nbytes, 1))
    buf = storage.buffer()
    if keep is not None:
        keep.append(buf)  # not collected (and so not reused) before the frame is sent
    view = np.ndarray(arr.shape, dt, buffer=buf, offset=0)
    view[...] = arr
    if tensor is not None:
        torch = _torch()
        moved = torch.from_numpy(view.view(np.uint8)).view(tensor.dtype).view(tensor.shape) if arr.size else None
        if moved is not None:
            with torch.no_grad():
                tensor.set_(moved)
    strides, acc = [], 1
    for n in reversed(arr.shape):
        strides.insert(0, acc)
        acc *= n
    return storage, 0, strides


_strategy_now = [os.environ.get("TENSORPROC_SHARING_STRATEGY") or "file_descriptor"]


def _strategy():
    return _strategy_now[0]


def encode(value):
    got = _as_array(value)
    if got is not None and got[0].ndim <= MAX_NDIM:
        return _encode_tensor(*got)
    return _PlainWriter().encode(value)


def _export(storage):
    strat, name, fd = S.export(storage)
    nm = (name or "").encode("latin1")
    return STRATEGIES.index(strat), nm, fd


def _encode_tensor(arr, tensor):
    keep = []
    storage, offset, strides = place(arr, tensor, keep)
    if storage.offset % PIECE_ALIGN or storage.offset // PIECE_ALIGN > 0xFFFF:
        raise NotTransferableError("a storage at byte offset %d cannot travel in a TENSOR frame" % storage.offset)
    strat, nm, fd = _export(storage)
    ndim = arr.ndim
    head = struct.pack("<BBBBBBHdd", KIND_TENSOR, FRAME_VERSION, dtype_code(arr.dtype), ndim, strat, len(nm),
                       storage.offset // PIECE_ALIGN, float(storage.nbytes), float(offset))
    body = struct.pack("<%dd" % (2 * ndim), *[float(x) for x in list(arr.shape) + strides])
    return Frame(head + body + nm, [fd] if fd is not None else [], [storage], keep)


class _PlainWriter:
    def __init__(self):
        self.out = bytearray(struct.pack("<BBI", KIND_PLAIN, FRAME_VERSION, 0))
        self.nodes = 0
        self.storages = []
        self.seen = set()
        self.keep = []

    def encode(self, value):
        self.write(value, 0, "")
        struct.pack_into("<I", self.out, 2, len(self.out))
        exported, fds = [], []
        table = bytearray(struct.pack("<H", len(self.storages)))
        try:
            for s in self.storages:
                strat, nm, fd = _export(s)
                exported.append(s)
                table += struct.pack("<BBHdI", strat, len(nm), NO_FD if fd is None else len(fds), float(s.nbytes), s.offset)
                table += nm
                if fd is not None:
                    fds.append(fd)
        except BaseException:
            for s in exported:
                S.abandon(s)
            raise
        data = bytes(self.out + table)
        if len(data) > INLINE_MAX:
            for s in exported:
                S.abandon(s)
            raise NotTransferableError("this message is %d bytes as a frame, over %d: put large data in an array." % (len(data), INLINE_MAX))
        return Frame(data, fds, exported, self.keep)

    def _node(self, v, depth, path):
        self.nodes += 1
        if self.nodes > MAX_NODES or depth >= MAX_DEPTH:
            raise NotTransferableError("%s: a message holds at most %d containers, %d deep" % (path or "(message)", MAX_NODES, MAX_DEPTH))
        if id(v) in self.seen:
            raise NotTransferableError("%s: an object met twice (shared or cyclic) cannot travel from Python" % (path or "(message)"))
        self.seen.add(id(v))

    def write(self, v, depth, path):
        out = self.out
        if v is None:
            out.append(T_NULL)
        elif v is True or isinstance(v, np.bool_) and v:
            out.append(T_TRUE)
        elif v is False or isinstance(v, np.bool_):
            out.append(T_FALSE)
        elif isinstance(v, (int, np.integer)):
            v = int(v)
            if -(2**31) <= v < 2**31:
                out += struct.pack("<Bi", T_INT, v)
            elif abs(v) <= 2**53:
                out += struct.pack("<Bd", T_FLOAT, float(v))
            else:
                raise NotTransferableError("%s: the integer %d is past 2**53, where a JS number is exact: send it as a string or an int64 array" % (path or "(message)", v))
        elif isinstance(v, (float, np.floating)):
            out += struct.pack("<Bd", T_FLOAT, float(v))
        elif isinstance(v, str):
            out.append(T_STRING)
            self._str(v)
        elif isinstance(v, (list, tuple)):
            self._node(v, depth, path)
            if len(v) > MAX_ITEMS:
                raise NotTransferableError("%s: a list of %d entries (at most %d)" % (path or "(message)", len(v), MAX_ITEMS))
            out += struct.pack("<BI", T_ARRAY, len(v))
            for i, x in enumerate(v):
                self.write(x, depth + 1, "%s[%d]" % (path, i))
        elif isinstance(v, dict):
            self._node(v, depth, path)
            if len(v) > MAX_ITEMS:
                raise NotTransferableError("%s: a dict of %d entries (at most %d)" % (path or "(message)", len(v), MAX_ITEMS))
            out += struct.pack("<BI", T_OBJECT, len(v))
            for k, x in v.items():
                if not isinstance(k, str):
                    raise NotTransferableError("%s: dict key %r is not a string (JS object keys are)" % (path or "(message)", k))
                self._str(k)
                self.write(x, depth + 1, "%s.%s" % (path, k))
        else:
            got = _as_array(v)
            if got is None:
                raise NotTransferableError("%s: a %s cannot travel to Node (plain values, numpy arrays and torch CPU tensors can)" % (path or "(message)", type(v).__name__))
            arr, tensor = got
            self._node(v, depth, path)
            if arr.ndim > MAX_NDIM:
                raise NotTransferableError("%s: %d dimensions (at most %d)" % (path, arr.ndim, MAX_NDIM))
            storage, offset, strides = place(arr, tensor, self.keep)
            try:
                index = self.storages.index(storage)
            except ValueError:
                index = len(self.storages)
                if index >= MAX_FDS - 1:
                    raise NotTransferableError("a message carries at most %d storages" % (MAX_FDS - 1)) from None
                self.storages.append(storage)
            out += struct.pack("<BBBHd", T_TENSOR, dtype_code(arr.dtype), arr.ndim, index, float(offset))
            out += struct.pack("<%dd" % (2 * arr.ndim), *[float(x) for x in list(arr.shape) + strides])
        if len(out) > INLINE_MAX:
            raise NotTransferableError("this message is over %d bytes as a frame: put large data in an array" % INLINE_MAX)

    def _str(self, s):
        b = s.encode("utf-16-le", "surrogatepass")
        self.out += struct.pack("<I", len(b) // 2)
        self.out += b
