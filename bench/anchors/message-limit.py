"""W1's limit at small sizes (YARDSTICK.md): what one message between two processes costs
at least. A bare AF_UNIX SOCK_SEQPACKET socketpair, the transport tensorproc uses, between a
forked producer and its parent: COUNT datagrams of FRAME bytes (the size of tensorproc's
frame for one tensor), each with FDS descriptors passed by SCM_RIGHTS (what a
file_descriptor frame carries; the receiver closes each, as a receiver that keeps none
would). No serialization, no event loop, no queue: Python's loop around the system calls.
Prints one JSON line: the receiver's seconds from the 2nd datagram to the last.

    python3 message-limit.py FRAME COUNT FDS
"""
import json
import os
import socket
import sys
import time


def main():
    frame, count, nfds = (int(x) for x in sys.argv[1:4])
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fds = [os.memfd_create("tensorproc-limit") for _ in range(nfds)]
    pid = os.fork()
    if pid == 0:
        b.close()
        msg = bytes(frame)
        if nfds:
            for _ in range(count):
                socket.send_fds(a, [msg], fds)
        else:
            for _ in range(count):
                a.send(msg)
        os._exit(0)
    a.close()

    def receive():
        if nfds:
            _, got, _, _ = socket.recv_fds(b, frame, nfds)
            for fd in got:
                os.close(fd)
        else:
            b.recv(frame)

    receive()
    t0 = time.perf_counter()
    for _ in range(count - 1):
        receive()
    seconds = time.perf_counter() - t0
    os.waitpid(pid, 0)
    print(json.dumps({"frame_bytes": frame, "fds": nfds, "count": count, "seconds": seconds}), flush=True)


if __name__ == "__main__":
    main()
