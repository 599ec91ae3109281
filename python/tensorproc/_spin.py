"""A Queue get that finds its queue empty watches the queue for a while before it sleeps: the
Python side of NOTE [Spinning before sleeping] (src/queue/spin.ts), the same rule, bound and
back-off as Node's gets.

Sleeping in poll() when the next message is microseconds away costs more than it saves: the
producer's sendmsg then pays for waking this process (an inter-processor interrupt, 20-45 us
through the hypervisor on a 2-vCPU VM), and a consumer that keeps up with its producer would
make it pay that on every message, slowing it down the more the faster the consumer is. So a
get reads the queue's SENT word before it receives (every put bumps it once its datagram is in
the socket: docs/protocol.md, "Channels"), and if the socket is empty, watches SENT for at most
SPIN_S (TENSORPROC_SPIN_US, default 200 us; never on one CPU, where the spin would hold the CPU
its producer needs), receiving again at once when it moves. Spins that come to nothing back
off: after n of them in a row, the next 2^n - 1 gets do not spin (n at most MAX_BACKOFF). The
spin holds the GIL, as Node's holds its event loop: at most SPIN_S, about what a sleep and a
wake-up cost.
"""
import os
import time

SENT = 16  # the Queue's word puts bump once their datagram is sent
MAX_BACKOFF = 8


def _spin_s():
    try:
        us = float(os.environ.get("TENSORPROC_SPIN_US") or 200)
    except ValueError:
        us = 200.0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return us / 1e6 if us > 0 and cpus > 1 else 0.0


SPIN_S = _spin_s()
_monotonic = time.monotonic


class GetSpin:
    """One Queue's gets: `skip` is the gets left not to spin (-1: never spin here)."""

    __slots__ = ("w32", "skip", "fails")

    def __init__(self, w32):
        self.w32 = w32
        self.skip = 0 if SPIN_S > 0 else -1
        self.fails = 0

    def spin(self, armed, deadline):
        """Watches SENT while it reads `armed` (what it read before the receive found nothing),
        at most SPIN_S and not past `deadline`; True when a put came meanwhile."""
        w32 = self.w32
        end = _monotonic() + SPIN_S
        if deadline is not None and deadline < end:
            end = deadline
        n = 0
        while w32[SENT] == armed:
            n += 1
            if not n & 31 and _monotonic() >= end:  # the clock every 32 loads (a few us)
                self.fails = f = min(self.fails + 1, MAX_BACKOFF)
                self.skip = (1 << f) - 1
                return False
        self.fails = 0
        return True
