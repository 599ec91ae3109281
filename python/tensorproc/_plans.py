"""TENSOR frames met before, decoded from what their first decoding found (NOTE [Frame plans]).

NOTE [Frame plans]
A producer recycles its segments (DESIGN.md), so a stream of tensors is a few TENSOR frames
arriving again and again byte for byte: the same segment, the same layout. All that decoding one
finds out besides the reference it carries (the handle; the array's dtype, shape, strides and
offset, checked against the frame's nbytes) depends on those bytes alone. So the first decoding
of a frame (_frames._decode_tensor, in full) keeps it here, as numpy made the array, under the
frame's bytes (at most PLANS_MAX frames; all forgotten when full), and the same bytes again go
straight to the import, which adopts or releases the reference and takes the descriptor as
always, and to the array: no unpacking, no name decoding, no layout checks, which were a tenth of
a message's cost for a Python consumer of small tensors. Only a frame whose array lies over its
storage, checked against the frame's own nbytes, is kept (any storage its handle brings later is
at least that long); what failed, and an empty tensor, are decoded in full every time.
"""
import numpy as np

from . import _segment as S

plans = {}  # frame bytes -> (strategy, name, piece offset, nbytes, dtype, shape, byte offset, strides or None)
PLANS_MAX = 1024
_frombuffer = np.frombuffer
_ndarray = np.ndarray


def remember(data, storage, a, handle):
    """Keeps the plan of TENSOR frame `data`, decoded in full to `a` over `storage`; `handle`:
    (strategy, name, piece offset, nbytes) as the frame gave them."""
    if storage.nbytes != handle[3] or a.base is None or a.base is not storage._buffer():
        return
    if len(plans) >= PLANS_MAX:
        plans.clear()
    strides = None if a.ndim == 1 and a.strides[0] == a.itemsize else a.strides
    at = a.__array_interface__["data"][0] - storage.addr
    plans[bytes(data)] = handle + (a.dtype, a.shape, at, strides)


def planned(plan, fds):
    """The array of a TENSOR frame met before, from its plan; takes the descriptor (at most one)."""
    strat, name, piece, nbytes, dt, shape, at, strides = plan
    buf = S.import_handle(strat, name, piece, nbytes, fds[0] if fds else None).buffer()
    if strides is None:  # 1-d and contiguous: frombuffer makes the same array, in half the time
        return _frombuffer(buf, dt, shape[0], at)
    return _ndarray(shape, dt, buf, at, strides)
