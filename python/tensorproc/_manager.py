"""This process's side of the file_system manager (docs/protocol.md, "The file_system manager"):
tells it which named segments this process maps, so that the names of a process killed while
it held them are removed. One JSON object per SOCK_SEQPACKET datagram."""
import json
import os
import socket
import sys
import warnings

PROTOCOL_VERSION = 1


def manager_dir():
    d = os.environ.get("TENSORPROC_MANAGER_DIR")
    if d:
        return d
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return os.path.join(xdg, "tensorproc")
    return "/tmp/tensorproc-%d" % os.getuid()


class ManagerClient:
    def __init__(self):
        self._sock = None
        self._mapped = {}
        self._warned = False

    def _connect(self):
        if self._sock is not None:
            return True
        if os.environ.get("TENSORPROC_MANAGER") == "0":
            return False
        path = os.path.join(manager_dir(), "manager-v%d.sock" % PROTOCOL_VERSION)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.connect(path)
            s.send(json.dumps({"t": "hello", "v": PROTOCOL_VERSION}).encode())
        except OSError as e:
            s.close()
            if not self._warned:
                self._warned = True
                warnings.warn(
                    "tensorproc: the file_system manager is not reachable at %s (%s): named segments this "
                    "process makes are not removed if it is killed. A Node process using file_system "
                    "starts it." % (path, e.strerror),
                    RuntimeWarning,
                    stacklevel=3,
                )
            return False
        self._sock = s
        if self._mapped:
            self._send("hold", list(self._mapped))
        return True

    def _send(self, t, names):
        if self._sock is None:
            return
        try:
            self._sock.send(json.dumps({"t": t, "names": names}).encode())
        except OSError:
            self._sock.close()
            self._sock = None

    def hold(self, name):
        n = self._mapped.get(name, 0)
        self._mapped[name] = n + 1
        if n == 0 and self._connect():
            self._send("hold", [name])

    def drop(self, name):
        n = self._mapped.get(name, 0)
        if n <= 1:
            self._mapped.pop(name, None)
            self._send("drop", [name])
        else:
            self._mapped[name] = n - 1
        if not self._mapped and self._sock is not None:
            try:
                self._sock.send(b'{"t":"bye"}')
            except OSError:
                pass
            self._sock.close()
            self._sock = None


client = ManagerClient()
