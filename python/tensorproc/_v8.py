"""A reader of the subset of V8's ValueSerializer format (what Node's `v8.serialize` writes) that
plain data takes: docs/protocol.md, "The V8 subset". Written from the format's tag list; anything
outside the subset is UnsupportedValueError naming the tag, never a guess."""
import datetime
import math
import struct

import numpy as np

from ._frames import FrameDecodeError


class UnsupportedValueError(FrameDecodeError):
    """A VALUE frame holds something the Python peer does not read (its V8 tag is `tag`)."""

    code = "ERR_TP_UNSUPPORTED_VALUE"

    def __init__(self, tag, what):
        self.tag = tag
        super().__init__(
            "A received message holds %s (V8 serializer tag %r, 0x%02x), which the Python peer does not read: "
            "send numbers, strings, bigints, arrays, objects, Maps, Sets, Dates, typed arrays and tensors."
            % (what, chr(tag) if 32 < tag < 127 else "?", tag))


# Version 13 gave host objects their tag, 14 the view flags, 15 shared objects: Node 20 writes 15.
MIN_VERSION, MAX_VERSION = 13, 15
MAX_SPARSE = 1 << 24  # a sparse array's length, as a Python list of that many entries

# Typed array subtags -> numpy dtypes (little-endian, as the format is host order on x86/arm64).
VIEW_DTYPES = {
    ord("b"): "<i1", ord("B"): "<u1", ord("C"): "<u1", ord("w"): "<i2", ord("W"): "<u2",
    ord("d"): "<i4", ord("D"): "<u4", ord("f"): "<f4", ord("F"): "<f8", ord("q"): "<i8",
    ord("Q"): "<u8", ord("h"): "<f2", ord("?"): "<u1",  # DataView: its bytes
}

_NAMES = {
    ord("R"): "a RegExp", ord("r"): "an Error", ord("u"): "a SharedArrayBuffer", ord("t"): "a transferred ArrayBuffer",
    ord("~"): "a resizable ArrayBuffer", ord("p"): "a shared object", ord("w"): "a WebAssembly module",
    ord("m"): "a WebAssembly memory", ord("S"): "a UTF-8 string of an old format",
}


class Reader:
    """Reads values from `data` (bytes-like) at `pos`; `host(index)` turns a host object (a
    tensorproc table entry) into its value."""

    def __init__(self, data, pos=0, host=None):
        self.d = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
        self.pos = pos
        self.end = len(data)
        self.host = host
        self.ids = []  # objects by id, in the order V8 gave them
        self.version = 0

    # ---- primitives ----
    def _need(self, n):
        if self.pos + n > self.end:
            raise FrameDecodeError("A received message is truncated (a V8 value runs past its end).")

    def byte(self):
        self._need(1)
        b = self.d[self.pos]
        self.pos += 1
        return b

    def varint(self):
        result, shift = 0, 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7
            if shift > 70:
                raise FrameDecodeError("A received message has a malformed varint.")

    def zigzag(self):
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def double(self):
        self._need(8)
        (v,) = struct.unpack_from("<d", self.d, self.pos)
        self.pos += 8
        return v

    def raw(self, n):
        self._need(n)
        b = bytes(self.d[self.pos:self.pos + n])
        self.pos += n
        return b

    def tag(self):
        while True:  # padding aligns two-byte strings
            t = self.byte()
            if t != 0:
                return t

    def peek_tag(self):
        at = self.pos
        while at < self.end and self.d[at] == 0:
            at += 1
        return self.d[at] if at < self.end else None

    def header(self):
        if self.byte() != 0xFF:
            raise FrameDecodeError("A received VALUE frame has no V8 serializer header.")
        self.version = self.varint()
        if not MIN_VERSION <= self.version <= MAX_VERSION:
            raise FrameDecodeError(
                "A received VALUE frame is V8 serializer format %d; the Python peer reads %d to %d."
                % (self.version, MIN_VERSION, MAX_VERSION))

    # ---- values ----
    def _add(self, obj):
        self.ids.append(obj)
        return obj

    def _reserve(self):
        self.ids.append(None)
        return len(self.ids) - 1

    def value(self, depth=0):
        if depth > 1000:
            raise FrameDecodeError("A received message nests too deep.")
        v = self._value(self.tag(), depth)
        if isinstance(v, _Buffer):  # an ArrayBuffer, or the buffer of the view that follows it ('V')
            if self.peek_tag() == 0x56:
                self.tag()
                return self._view(v)
            return v.data
        return v

    def _value(self, t, depth):
        c = chr(t)
        if c in "_0":  # undefined, null
            return None
        if c == "T":
            return True
        if c == "F":
            return False
        if c == "I":
            return self.zigzag()
        if c == "U":
            return self.varint()
        if c == "N":
            return self.double()
        if c == "Z":
            return self._bigint()
        if c == '"':
            return self.raw(self.varint()).decode("latin1")
        if c == "c":
            n = self.varint()
            return self.raw(n).decode("utf-16-le", "surrogatepass")
        if c == "^":
            k = self.varint()
            if k >= len(self.ids):
                raise FrameDecodeError("A received message refers to object %d of %d." % (k, len(self.ids)))
            return self.ids[k]
        if c == "o":
            out = self._add({})
            self._props(out, ord("{"), depth)
            return out
        if c == "A":
            n = self.varint()
            if n > self.end - self.pos:
                raise FrameDecodeError("A received array claims %d elements in %d bytes." % (n, self.end - self.pos))
            out = self._add([None] * n)
            for i in range(n):
                if self.peek_tag() == 0x2D:  # '-': a hole
                    self.tag()
                    continue
                out[i] = self.value(depth + 1)
            self._props({}, ord("$"), depth, array=out)
            self.varint()  # length, again
            return out
        if c == "a":
            n = self.varint()
            if n > MAX_SPARSE:
                raise FrameDecodeError("A received sparse array has length %d (the Python peer reads up to %d)." % (n, MAX_SPARSE))
            out = self._add([None] * n)
            self._props({}, ord("@"), depth, array=out)
            self.varint()
            return out
        if c == "D":
            return self._add(_date(self.double()))
        if c in "yx":
            return self._add(c == "y")
        if c == "n":
            return self._add(self.double())
        if c == "z":
            return self._add(self._bigint())
        if c == "s":
            return self._add(self.value(depth + 1))
        if c == ";":
            k = self._reserve()
            out = {}
            self.ids[k] = out
            while self.peek_tag() != ord(":"):
                key = self.value(depth + 1)
                try:
                    out[key] = self.value(depth + 1)
                except TypeError:
                    raise FrameDecodeError("A received Map has a key Python cannot hash (%s)." % type(key).__name__) from None
            self.tag()
            self.varint()
            return out
        if c == "'":
            k = self._reserve()
            out = set()
            self.ids[k] = out
            while self.peek_tag() != ord(","):
                item = self.value(depth + 1)
                try:
                    out.add(item)
                except TypeError:
                    raise FrameDecodeError("A received Set holds a value Python cannot hash (%s)." % type(item).__name__) from None
            self.tag()
            self.varint()
            return out
        if c == "B":
            n = self.varint()
            return self._add(_Buffer(bytearray(self.raw(n))))
        if c == "\\":
            k = self._reserve()
            if self.host is None:
                raise UnsupportedValueError(t, "a host object")
            self.ids[k] = self.host(self.varint())
            return self.ids[k]
        if c == "?":  # an object count, safe to ignore
            self.varint()
            return self.value(depth)
        raise UnsupportedValueError(t, _NAMES.get(t, "a value of an unknown kind"))

    def _props(self, out, end, depth, array=None):
        n = 0
        while self.peek_tag() != end:
            if self.peek_tag() is None:
                raise FrameDecodeError("A received message is truncated (an object has no end).")
            key = self.value(depth + 1)
            val = self.value(depth + 1)
            n += 1
            if array is not None:
                if isinstance(key, (int, float)) and key == int(key) and 0 <= key < len(array):
                    array[int(key)] = val
                # other properties of an array (not indices) are not kept, as in PLAIN
                continue
            out[_key(key)] = val
        self.tag()
        self.varint()  # the property count

    def _bigint(self):
        bits = self.varint()
        n = bits >> 1
        v = int.from_bytes(self.raw(n), "little")
        return -v if bits & 1 else v

    def _view(self, buf):
        sub = self.byte()
        off = self.varint()
        length = self.varint()
        if self.version >= 14:
            self.varint()  # flags (length-tracking, resizable-backed): a fixed view here
        k = self._reserve()
        dt = VIEW_DTYPES.get(sub)
        if dt is None:
            raise UnsupportedValueError(sub, "a typed array of an unknown kind")
        size = np.dtype(dt).itemsize
        if off + length > len(buf.data) or off % size or length % size:
            raise FrameDecodeError("A received typed array does not fit its buffer.")
        arr = np.frombuffer(buf.data, dtype=dt, count=length // size, offset=off)
        self.ids[k] = arr
        return arr


class _Buffer:
    """An ArrayBuffer while it is read (a view may follow it); bytes once it is a value."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data


def _key(k):
    if isinstance(k, str):
        return k
    if isinstance(k, float) and k == int(k):
        k = int(k)
    return str(k)


def _date(ms):
    if math.isnan(ms):
        return None  # an invalid Date
    return datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(milliseconds=ms)
