"""tensorproc.attach(name): finds a named object in the registry and receives it by the attach
exchange (docs/named.md, "The registry and the attach exchange")."""
import errno
import json
import os
import re
import socket
import stat
import struct
import time

from ._channels import Connection, Event, JoinableQueue, Queue, SimpleQueue, fds_of
from ._manager import manager_dir

EXCHANGE_VERSION = 1
NAMES_FOLDER = "names-v1"
NAME_SYNTAX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_EXCHANGE = 64 * 1024


class NameNotFoundError(LookupError):
    code = "ERR_TP_NAME_NOT_FOUND"


class NameForbiddenError(PermissionError):
    code = "ERR_TP_NAME_FORBIDDEN"


class AttachError(RuntimeError):
    """The creator refused, or sent what this peer cannot use; `code` is the creator's."""

    def __init__(self, message, code="ERR_TP_ATTACH"):
        super().__init__(message)
        self.code = code


def _check_dir(path):
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise NameForbiddenError(
            "%s is not a directory of this user closed to others (mode 0700): names there are not trusted." % path)


def _peer_uid(sock):
    cred = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", cred)[1]  # pid, uid, gid


def attach(name, timeout=5.0):
    if not isinstance(name, str) or not NAME_SYNTAX.match(name):
        raise ValueError("%r is not a tensorproc name (1 to 64 letters, digits, _ - ., a letter or digit first)" % (name,))
    d = manager_dir()
    path = os.path.join(d, NAMES_FOLDER, name + ".sock")
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.005
    while True:
        reply = None
        try:
            _check_dir(d)
            _check_dir(os.path.join(d, NAMES_FOLDER))
            reply = _exchange(path, name)
        except FileNotFoundError:
            pass
        except ConnectionRefusedError:
            pass  # stale: its creator died; a new one may take the name
        if reply is not None:
            msg, fds = reply
            if msg.get("t") == "error" and msg.get("code") == "ERR_TP_NAME_NOT_FOUND":
                pass  # given up just then
            else:
                return _rebuild(name, msg, fds)
        if deadline is not None and time.monotonic() >= deadline:
            raise NameNotFoundError(
                "No object is named %r (looked in %s for %s s): is its creator running, as this user, "
                "with the same TENSORPROC_MANAGER_DIR?" % (name, os.path.dirname(path), timeout))
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _exchange(path, name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    try:
        s.settimeout(10.0)
        s.connect(path)
        if _peer_uid(s) != os.getuid():
            raise NameForbiddenError("The object named %r belongs to another user." % name)
        s.send(json.dumps({"t": "attach", "v": EXCHANGE_VERSION, "name": name}).encode())
        data, anc, flags, _ = s.recvmsg(MAX_EXCHANGE, socket.CMSG_SPACE(253 * 4), socket.MSG_CMSG_CLOEXEC)
        fds = fds_of(anc)
        try:
            msg = json.loads(data.decode("utf-8")) if data else None
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            for fd in fds:
                os.close(fd)
            raise AttachError("The creator of %r answered with something that is not an attach reply." % name)
        return msg, fds
    finally:
        s.close()


def _rebuild(name, msg, fds):
    taken = set()

    def fd(i):
        if not isinstance(i, int) or i < 0 or i >= len(fds) or i in taken:
            raise AttachError("The reply for %r refers to descriptor %r of %d." % (name, i, len(fds)))
        taken.add(i)
        return fds[i]

    try:
        if msg.get("t") == "error":
            code = str(msg.get("code"))
            cls = NameForbiddenError if code == "ERR_TP_NAME_FORBIDDEN" else None
            if cls is not None:
                raise cls(str(msg.get("message")))
            raise AttachError(str(msg.get("message")), code)
        if msg.get("t") != "object" or msg.get("v") != EXCHANGE_VERSION or not msg.get("table"):
            raise AttachError("The reply for %r is exchange version %r; this peer speaks %d." % (name, msg.get("v"), EXCHANGE_VERSION))
        kind, state = msg["table"][0]
        if kind in ("queue", "joinable-queue"):
            maxsize, s, r, w = state
            return (JoinableQueue if kind == "joinable-queue" else Queue)(fd(s), fd(r), fd(w), int(maxsize))
        if kind == "simple-queue":
            s, r = state
            return SimpleQueue(fd(s), fd(r))
        if kind == "connection":
            f, mode = state
            return Connection(fd(f), int(mode))
        if kind == "event":
            (w,) = state
            return Event(fd(w))
        raise AttachError(
            "%r is a %s: the Python peer attaches Queue, JoinableQueue, SimpleQueue, Pipe ends and Event." % (name, kind),
            "ERR_TP_NOT_SUPPORTED")
    finally:
        for i, f in enumerate(fds):
            if i not in taken:
                os.close(f)
