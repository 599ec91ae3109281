"""Queue, SimpleQueue, Pipe ends and Event over the descriptors Node made (docs/protocol.md,
"Channels"): SOCK_SEQPACKET sockets, one frame per datagram, and a page of shared words."""
import array
import errno
import mmap
import os
import select
import socket
import struct
import time

from . import _atomic as A
from . import _frames as F
from . import _segment as S
from ._spin import GetSpin


class QueueEmpty(Exception):
    code = "ERR_TP_QUEUE_EMPTY"


class QueueFull(Exception):
    code = "ERR_TP_QUEUE_FULL"


class ChannelClosedError(EOFError):
    code = "ERR_TP_CLOSED"


class _Words:
    """The page of shared int32 words of a Queue or Event (a sealed memfd)."""

    def __init__(self, fd):
        self.fd = fd
        self.map = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        import ctypes

        self._anchor = ctypes.c_char.from_buffer(self.map)
        self.addr = ctypes.addressof(self._anchor)

    def w(self, i):
        return self.addr + 4 * i

    def load(self, i):
        return A.load(self.w(i))

    def close(self):
        if self.map is None:
            return
        self._anchor = None
        self.map.close()
        self.map = None
        os.close(self.fd)


_SOL_SOCKET, _SCM_RIGHTS = int(socket.SOL_SOCKET), int(socket.SCM_RIGHTS)
# Plain ints: or-ing the socket module's enum flags costs microseconds per message.
_RECV_FLAGS = int(socket.MSG_DONTWAIT | socket.MSG_CMSG_CLOEXEC)
_DONTWAIT = int(socket.MSG_DONTWAIT)
_SEND_FLAGS = int(socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
_TRUNCATED = int(socket.MSG_TRUNC | socket.MSG_CTRUNC)
_RECV_SPACE = socket.CMSG_SPACE(F.MAX_FDS * 4)
_MAX_FRAME = F.MAX_FRAME
_FD = struct.Struct("=i").unpack


def fds_of(anc):
    """The descriptors of a recvmsg()'s SCM_RIGHTS ancillary data (the one reader of them: the
    channels here and the attach exchange)."""
    fds = []
    for level, kind, payload in anc:
        if level == _SOL_SOCKET and kind == _SCM_RIGHTS:
            if len(payload) == 4:  # one descriptor, the common case
                fds.append(int.from_bytes(payload, "little", signed=True))
                continue
            a = array.array("i")
            a.frombytes(payload[: len(payload) - len(payload) % 4])
            fds.extend(a)
    return fds


def _deadline(timeout):
    return None if timeout is None else time.monotonic() + max(0.0, timeout)


def _left(deadline):
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class _Endpoint:
    """A send and a receive descriptor (one for both, for a pipe end)."""

    def __init__(self, send_fd, recv_fd):
        self.send_sock = socket.socket(fileno=send_fd)
        self.recv_sock = self.send_sock if recv_fd == send_fd else socket.socket(fileno=recv_fd)
        self._recvmsg = self.recv_sock.recvmsg  # bound once: recv() runs once per message
        self.spin = None  # a Queue's GetSpin (_spin.py)
        self.closed = False

    def send(self, frame, deadline=None):
        fds = frame.fds
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        while True:
            try:
                self.send_sock.sendmsg([frame.data], anc, _SEND_FLAGS)
                return
            except BlockingIOError:
                left = _left(deadline)
                if left == 0:
                    raise QueueFull("The socket stayed full.") from None
                _wait(self.send_sock, select.POLLOUT, left)

    def recv(self, deadline, armed=None):
        """(bytes, fds) of one datagram, or None when `deadline` passes; `armed`: what a Queue's
        SENT read before this receive, to spin on if the socket is empty (_spin.py)."""
        while True:
            try:
                data, anc, flags, _ = self._recvmsg(_MAX_FRAME, _RECV_SPACE, _RECV_FLAGS)
            except BlockingIOError:
                S.close_binned()  # nothing to batch them with now (NOTE [Descriptor bin])
                if armed is not None:
                    moved, armed = self.spin.spin(armed, deadline), None
                    if moved:
                        continue
                left = _left(deadline)
                if left == 0:
                    return None
                _wait(self.recv_sock, select.POLLIN, left)
                continue
            if not anc:
                fds = []
            elif len(anc) == 1 and anc[0][0] == _SOL_SOCKET and anc[0][1] == _SCM_RIGHTS and len(anc[0][2]) == 4:
                fds = [_FD(anc[0][2])[0]]  # one descriptor: fds_of's common case, without the call
            else:
                fds = fds_of(anc)
            if not data and not fds:
                raise ChannelClosedError("The other end of this channel is closed (every Node process holding it has gone).")
            if flags & _TRUNCATED:
                for fd in fds:
                    os.close(fd)
                raise F.FrameDecodeError("A received message was truncated (over %d bytes, or too many descriptors)." % F.MAX_FRAME)
            return data, fds

    def close(self):
        if self.closed:
            return
        self.closed = True
        self.send_sock.close()
        if self.recv_sock is not self.send_sock:
            self.recv_sock.close()


def _wait(sock, events, timeout):
    p = select.poll()
    p.register(sock.fileno(), events)
    p.poll(None if timeout is None else max(1, int(timeout * 1000)))


_decode = F.decode
# Queue words (src/queue/slots.ts NOTE [Queue slots], spin.ts)
COUNT, WAITERS, NOTICED, SENT = 0, 1, 2, 16


class SimpleQueue:
    def __init__(self, send_fd, recv_fd):
        self._e = _Endpoint(send_fd, recv_fd)

    def put(self, obj):
        frame = F.encode(obj)
        try:
            self._e.send(frame)
        except BaseException:
            frame.abandon()
            raise

    def get(self, timeout=None):
        got = self._e.recv(_deadline(timeout))
        if got is None:
            raise QueueEmpty("Nothing arrived on the queue within %s s." % timeout)
        return F.decode(*got)

    def empty(self):
        r, _, _ = select.select([self._e.recv_sock], [], [], 0)
        return not r

    def close(self):
        self._e.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


class Queue(SimpleQueue):
    def __init__(self, send_fd, recv_fd, state_fd, maxsize=0):
        super().__init__(send_fd, recv_fd)
        self._w = _Words(state_fd)
        self.maxsize = maxsize if maxsize > 0 else None
        # What a get touches, ready to use (NOTE [Hot words] in _header.py): the words to load
        # by index, the pointers of COUNT and NOTICED for compare-and-swaps, the receive.
        self._w32 = A.words(self._w.addr, 1024)
        self._count_at = A.ptr(self._w.addr + 4 * COUNT)
        self._noticed_at = A.ptr(self._w.addr + 4 * NOTICED)
        self._recv = self._e.recv
        self._spin = self._e.spin = GetSpin(self._w32)

    def qsize(self):
        return max(0, self._w.load(COUNT))

    def full(self):
        return self.maxsize is not None and self.qsize() >= self.maxsize

    def _claim(self):
        w = self._w.w(COUNT)
        while True:
            c = A.load(w)
            if c >= self.maxsize:
                return False
            if A.compare_exchange(w, c, c + 1) == c:
                return True

    def _read_notice(self):
        got = None
        try:
            data, anc, _, _ = self._e.send_sock.recvmsg(64, socket.CMSG_SPACE(8), socket.MSG_DONTWAIT)
            for fd in fds_of(anc):
                os.close(fd)
            got = True
        except (BlockingIOError, OSError):
            got = False
        return got

    def _notify(self):
        # run by most gets while a producer waits on a full queue: the pointer made once
        if not A.cas(self._noticed_at, 0, 1):
            return
        try:
            self._e.recv_sock.send(b"\x01", _DONTWAIT)
        except BlockingIOError:
            pass
        except OSError:
            A.store(self._w.w(NOTICED), 0)

    def put(self, obj, timeout=None):
        frame = F.encode(obj)
        try:
            if self.maxsize is None:
                A.add(self._w.w(COUNT), 1)
            elif not self._claim():
                self._wait_slot(_deadline(timeout), timeout)
            try:
                self._e.send(frame)
            except BaseException:
                self._taken()
                raise
        except BaseException:
            frame.abandon()
            raise
        A.add(self._w.w(SENT), 1)

    def _wait_slot(self, deadline, timeout):
        A.add(self._w.w(WAITERS), 1)
        try:
            while True:
                if self._claim():
                    return
                left = _left(deadline)
                if left == 0:
                    raise QueueFull("The queue stayed full (maxsize %d) for %s s." % (self.maxsize, timeout))
                _wait(self._e.send_sock, select.POLLIN, min(left, 0.05) if left is not None else 0.05)
                if self._read_notice():
                    A.store(self._w.w(NOTICED), 0)
        finally:
            A.sub(self._w.w(WAITERS), 1)

    def _taken(self):
        w32, at, cas = self._w32, self._count_at, A.cas
        c = w32[COUNT]
        while c > 0 and not cas(at, c, c - 1):  # never below 0
            c = w32[COUNT]
        if w32[WAITERS] > 0:
            self._notify()

    def get(self, timeout=None):
        spin, armed = self._spin, None
        if spin.skip == 0:  # SENT read before the receive looks (_spin.py)
            armed = self._w32[SENT]
        elif spin.skip > 0:
            spin.skip -= 1
        got = self._recv(None if timeout is None else _deadline(timeout), armed)
        if got is None:
            raise QueueEmpty("Nothing arrived on the queue within %s s." % timeout)
        self._taken()
        return _decode(got[0], got[1])

    def close(self):
        self._spin.skip = -1  # a get after close() reads no word of the page unmapped below: its receive fails
        super().close()
        self._w.close()


READABLE, WRITABLE = 1, 2


class Connection:
    """One end of a Pipe: send() / recv() / poll()."""

    def __init__(self, fd, mode=READABLE | WRITABLE):
        self._e = _Endpoint(fd, fd)
        self.readable = bool(mode & READABLE)
        self.writable = bool(mode & WRITABLE)

    def send(self, obj):
        if not self.writable:
            raise ValueError("This end of a one-way Pipe only receives.")
        frame = F.encode(obj)
        try:
            self._e.send(frame)
        except BaseException:
            frame.abandon()
            raise

    def recv(self, timeout=None):
        got = self._e.recv(_deadline(timeout))
        if got is None:
            raise TimeoutError("Nothing arrived within %s s." % timeout)
        return F.decode(*got)

    def poll(self, timeout=0.0):
        r = select.poll()
        r.register(self._e.recv_sock.fileno(), select.POLLIN)
        return bool(r.poll(None if timeout is None else int(timeout * 1000)))

    def close(self):
        self._e.close()


# Event words (src/queue/event.ts)
FLAG, E_WAITERS, SETS = 0, 1, 2


class Event:
    def __init__(self, state_fd):
        self._w = _Words(state_fd)

    def is_set(self):
        return self._w.load(FLAG) == 1

    def set(self):
        A.store(self._w.w(FLAG), 1)
        A.add(self._w.w(SETS), 1)
        if self._w.load(E_WAITERS) > 0:
            A.futex_wake(self._w.w(SETS))

    def clear(self):
        A.store(self._w.w(FLAG), 0)

    def wait(self, timeout=None):
        w = self._w
        sets = w.load(SETS)
        if w.load(FLAG) == 1:
            return True
        deadline = _deadline(timeout)
        A.add(w.w(E_WAITERS), 1)
        try:
            while True:
                if w.load(FLAG) == 1 or w.load(SETS) != sets:
                    return True
                left = _left(deadline)
                if left == 0:
                    return False
                A.futex_wait(w.w(SETS), sets, min(left, 1.0) if left is not None else 1.0)
        finally:
            A.sub(w.w(E_WAITERS), 1)

    def close(self):
        self._w.close()


# JoinableQueue words (src/queue/joinable-queue.ts NOTE [Unfinished tasks])
UNFINISHED, JOINERS, DONE = 32, 33, 48


class JoinableQueue(Queue):
    """A Queue whose items count as unfinished until task_done(); join() waits for none left."""

    def put(self, obj, timeout=None):
        A.add(self._w.w(UNFINISHED), 1)
        try:
            super().put(obj, timeout)
        except BaseException:
            self._finish()
            raise

    def _finish(self):
        w = self._w.w(UNFINISHED)
        while True:
            c = A.load(w)
            if c <= 0:
                return False
            if A.compare_exchange(w, c, c - 1) != c:
                continue
            if c == 1:
                A.add(self._w.w(DONE), 1)
                if self._w.load(JOINERS) > 0:
                    A.futex_wake(self._w.w(DONE))
            return True

    def task_done(self):
        if not self._finish():
            e = ValueError("task_done() called more times than items were put")
            e.code = "ERR_TP_TASK_DONE_TOO_MANY"
            raise e

    def join(self, timeout=None):
        w = self._w
        deadline = _deadline(timeout)
        A.add(w.w(JOINERS), 1)
        try:
            while True:
                done = w.load(DONE)
                if w.load(UNFINISHED) <= 0:
                    return True
                left = _left(deadline)
                if left == 0:
                    return False
                A.futex_wait(w.w(DONE), done, min(left, 1.0) if left is not None else 1.0)
        finally:
            A.sub(w.w(JOINERS), 1)
