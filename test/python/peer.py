"""The Python side of test/python/*.test.ts: a peer given two Queues by inherited descriptors
(3, 4, 5: Node -> Python; 6, 7, 8: Python -> Node), doing what each message asks."""
import os
import sys

import numpy as np

import tensorproc as tp

inbox = tp.from_fds("queue", [3, 4, 5])
outbox = tp.from_fds("queue", [6, 7, 8])
held = []
mine = {}


def describe(a):
    size = a.dtype.itemsize
    name = "bfloat16" if a.dtype.metadata and a.dtype.metadata.get("tensorproc") == "bfloat16" else a.dtype.name
    first = last = None
    if a.size:
        b = a
        if name == "bfloat16":  # raw words: as the float32 they are the top half of
            b = (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
        first, last = b[(0,) * a.ndim].item(), b[tuple(n - 1 for n in a.shape)].item()
    return {"dtype": name, "shape": list(a.shape), "stride": [s // size for s in a.strides], "first": first, "last": last}


def tagged(v):
    """A VALUE frame's Python value as JSON-like data Node can compare (types named)."""
    import datetime
    import math

    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return {"t": "int", "v": str(v)}
    if isinstance(v, float):
        return {"t": "float", "v": "nan" if math.isnan(v) else repr(v)}
    if isinstance(v, np.ndarray):
        return {"t": "ndarray", "dtype": v.dtype.name, "v": [str(x) for x in v.tolist()], "shared": tp.is_shared(v)}
    if isinstance(v, bytearray):
        return {"t": "bytes", "v": list(v)}
    if isinstance(v, datetime.datetime):
        return {"t": "date", "v": v.isoformat()}
    if isinstance(v, list):
        return [tagged(x) for x in v]
    if isinstance(v, set):
        return {"t": "set", "v": sorted((tagged(x) for x in v), key=repr)}
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v):
            return {"t": "dict", "v": {k: tagged(x) for k, x in v.items()}}
        return {"t": "map", "v": [[tagged(k), tagged(x)] for k, x in v.items()]}
    return {"t": type(v).__name__}


def walk(v, f):
    if isinstance(v, np.ndarray):
        return f(v)
    if isinstance(v, list):
        return [walk(x, f) for x in v]
    if isinstance(v, dict):
        return {k: walk(x, f) for k, x in v.items()}
    return v


while True:
    try:
        m = inbox.get()
    except tp.FrameDecodeError as e:  # what the peer cannot read is answered, not fatal
        outbox.put({"error": e.code, "type": type(e).__name__, "tag": getattr(e, "tag", None), "message": str(e)})
        continue
    if isinstance(m, np.ndarray):  # a lone tensor: back as it came (a TENSOR frame both ways)
        outbox.put(m)
        m = None
        continue
    op = m["op"]
    if op == "echo":  # the value back as it came (tensors: the same memory), and what Python saw
        outbox.put({"value": m["value"], "seen": walk(m["value"], describe)})
    elif op == "tagged":  # a VALUE frame's value, its types named (test/python/value.test.ts)
        out = tagged(m["value"])
        m = None  # its arrays are collected before the answer goes
        outbox.put(out)
    elif op == "big":  # a Map too large to answer whole: its size, its last entry, its tensor
        big = m["value"]["big"]
        k = max(big)
        out = {"n": len(big), "last": [k, big[k]], "t": tagged(m["value"]["t"])}
        m = big = None
        outbox.put(out)
    elif op == "same":  # whether two received objects are one Python object (references in V8's format)
        outbox.put(m["value"][0] is m["value"][1])
    elif op == "fill":  # a write from Python that Node must see
        m["t"][...] = m["v"]
        outbox.put("filled")
    elif op == "make":  # arrays made here: every dtype, a strided view, a plain copy, a torch tensor
        out = {}
        for name in m["dtypes"]:
            a = tp.empty((3, 4), name)
            a[...] = np.arange(12).reshape(3, 4).astype(a.dtype)
            out[name] = a
        base = tp.empty((4, 6), "float64")
        base[...] = np.arange(24).reshape(4, 6)
        out["strided"] = base.T[1:4]
        out["copied"] = np.arange(5, dtype=np.int16) * 3  # not shared: copied into a segment
        mine["shared"] = tp.zeros((8,), "int32")
        out["shared"] = mine["shared"]
        try:
            import torch

            t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
            out["torch"] = t
            out["torch_moved"] = tp.is_shared(t)
            mine["torch"] = t
        except ImportError:
            out["torch"] = None
        outbox.put(out)
        if out.get("torch") is not None:
            mine["torch_after"] = tp.is_shared(mine["torch"])
    elif op == "read":  # what Node wrote into arrays Python made
        outbox.put({"shared": mine["shared"].tolist(), "torch_shared": mine.get("torch_after")})
    elif op == "torch":  # a received array as a torch tensor, written through torch
        import torch

        t = tp.to_torch(m["t"])
        t.add_(1)
        outbox.put({"ptr_same": t.data_ptr() == m["t"].__array_interface__["data"][0]})
    elif op == "size":  # the arrays are collected before the answer goes
        n = sum(a.size for a in m["value"])
        m = None
        outbox.put(n)
    elif op == "hold":  # keep what arrived, so that a kill finds it held
        held.append(m["value"])
        outbox.put(len(held))
    elif op == "drop":
        for v in held:
            walk(v, tp.release)
        held.clear()
        m = None
        outbox.put("dropped")
    elif op == "exit":
        outbox.put("bye")
        break
    # Nothing of this message is kept past its answer (its arrays are collected now): `t` of
    # "torch" wraps a piece of Node's slab, and kept it held until Node's GC happened to close
    # that slab during a later test, which then saw it busy (CI, 2026-12-05).
    m = v = t = out = big = None
