"""tensorproc for Python: the other end of a Node program's tensorproc Queue, SimpleQueue, Pipe
or Event, with tensors as numpy arrays over the same shared memory. Speaks docs/protocol.md."""
import atexit
import os

import numpy as np

from . import _frames as F
from . import _own as O
from . import _segment as S
from ._channels import ChannelClosedError, Connection, Event, JoinableQueue, Queue, QueueEmpty, QueueFull, SimpleQueue
from ._frames import FrameDecodeError, NotTransferableError, DTYPES
from ._segment import BadHandleError
from ._v8 import UnsupportedValueError
from ._attach import AttachError, NameForbiddenError, NameNotFoundError

__version__ = "0.1.0"
PROTOCOL_VERSION = F.FRAME_VERSION

__all__ = [
    "attach", "empty", "zeros", "release", "is_shared", "to_torch", "set_sharing_strategy",
    "get_sharing_strategy", "JoinableQueue", "Queue", "SimpleQueue", "Connection", "Event", "QueueEmpty",
    "QueueFull", "ChannelClosedError", "FrameDecodeError", "UnsupportedValueError", "NotTransferableError",
    "BadHandleError", "AttachError", "NameNotFoundError", "NameForbiddenError", "DTYPES",
]


def get_sharing_strategy():
    return F._strategy_now[0]


def set_sharing_strategy(name):
    """'file_descriptor' (memfd, default) or 'file_system' (names in /dev/shm) for what this process allocates."""
    if name not in F.STRATEGIES:
        e = TypeError("unknown sharing strategy %r: one of %s" % (name, ", ".join(F.STRATEGIES)))
        e.code = "ERR_TP_INVALID_STRATEGY"
        raise e
    F._strategy_now[0] = name


def empty(shape, dtype="float32"):
    """A new contiguous array in a shared segment of this process (recycled once free): put it as many times as you like, no copy."""
    if isinstance(shape, int):
        shape = (shape,)
    dt = F.dtype_of(dtype) if isinstance(dtype, str) and dtype in DTYPES else np.dtype(dtype)
    F.dtype_code(dt)
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    storage = O.allocate(F._strategy(), max(n, 1))
    return np.ndarray(tuple(shape), dt, buffer=storage.buffer(), offset=0)


def zeros(shape, dtype="float32"):
    a = empty(shape, dtype)
    a.fill(0)
    return a


def _storage(arr):
    if not isinstance(arr, np.ndarray):
        got = F._as_array(arr)
        if got is None:
            return None
        arr = got[0]
    ptr = arr.__array_interface__["data"][0]
    return S.storage_of(ptr, max(1, arr.dtype.itemsize))


def is_shared(arr):
    """Whether `arr` (a numpy array or torch tensor) lies in a tensorproc shared segment."""
    return _storage(arr) is not None


def release(arr):
    """Gives back this process's hold on the shared memory under `arr` now, rather than when it
    is collected. The memory stays mapped while arrays over it live, but the producer may reuse
    it: do not read it afterwards. Releasing twice is a no-op."""
    s = _storage(arr)
    if s is not None:
        s.release()


def to_torch(arr):
    """torch.from_numpy(arr), without a copy; bfloat16 arrays (tagged uint16) become torch.bfloat16."""
    import torch

    if arr.dtype.metadata and arr.dtype.metadata.get("tensorproc") == "bfloat16":
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


def attach(name, timeout=5.0):
    """The named Queue / SimpleQueue / Pipe end / Event a Node process made with { name }."""
    from ._attach import attach as _a

    return _a(name, timeout)


def from_fds(kind, fds, maxsize=0, mode=3):
    """The channel over descriptors this process was given (inherited, or received): `kind` is
    'queue' (send, recv, state), 'simple-queue' (send, recv), 'connection' (fd) or 'event' (state)."""
    if kind == "queue":
        return Queue(fds[0], fds[1], fds[2], maxsize)
    if kind == "simple-queue":
        return SimpleQueue(fds[0], fds[1])
    if kind == "connection":
        return Connection(fds[0], mode)
    if kind == "event":
        return Event(fds[0])
    raise ValueError("unknown channel kind %r" % kind)


atexit.register(S.release_all)
