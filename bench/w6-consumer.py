"""W6's Python consumer (bench/python.ts): the W1 loop (get, read the first and last element,
drop) over what a Node producer sends, one JSON line per size: seconds from the 2nd message.

    python3 w6-consumer.py tensorproc SIZE:COUNT ...      (a Queue on descriptors 3, 4, 5)
    python3 w6-consumer.py socket PATH SIZE:COUNT ...     (length-prefixed bytes on a Unix socket)
"""
import json
import socket
import struct
import sys
import time

import numpy as np


def tensorproc_loop(plan):
    import tensorproc as tp

    q = tp.from_fds("queue", [3, 4, 5])
    for size, count in plan:
        x = q.get()
        s = float(x[0]) + float(x[-1])
        del x
        t0 = time.perf_counter()
        for _ in range(count - 1):
            x = q.get()
            s += float(x[0]) + float(x[-1])
            del x
        print(json.dumps({"bytes": size, "count": count, "seconds": time.perf_counter() - t0, "s": s}), flush=True)


def read_exactly(sock, view):
    got = 0
    n = len(view)
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("the producer closed the socket")
        got += k


def socket_loop(path, plan):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    head = bytearray(8)
    for size, count in plan:
        def one():
            read_exactly(sock, memoryview(head))
            (n,) = struct.unpack("<Q", head)
            buf = bytearray(n)  # a fresh buffer per message: the copy a receiver keeps
            read_exactly(sock, memoryview(buf))
            x = np.frombuffer(buf, dtype=np.float32)
            return float(x[0]) + float(x[-1])

        s = one()
        t0 = time.perf_counter()
        for _ in range(count - 1):
            s += one()
        print(json.dumps({"bytes": size, "count": count, "seconds": time.perf_counter() - t0, "s": s}), flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "tensorproc":
        tensorproc_loop([tuple(int(v) for v in a.split(":")) for a in sys.argv[2:]])
    else:
        socket_loop(sys.argv[2], [tuple(int(v) for v in a.split(":")) for a in sys.argv[3:]])
