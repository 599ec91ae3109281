"""The segment header (docs/protocol.md, "Segment header"): one page of int32 words at the start
of every shared segment, and the reference-slot operations on it. Mirrors
src/sharing/segment-header.ts; every access is atomic (_atomic.py)."""
from . import _atomic as A

HEADER_BYTES = 4096
MAGIC = 0x47535054  # "TPSG" little-endian
VERSION = 2
W_MAGIC, W_VERSION, W_REFS, W_PID, W_CAP_LO, W_CAP_HI, W_WAITING, W_SLOTS_USED, W_UNWITNESSED = range(9)
W_SLOTS = 16
SLOTS = (HEADER_BYTES // 4 - W_SLOTS) // 2
RECLAIMING = -1


def count_word(i):
    return W_SLOTS + 2 * i + 1


# NOTE [Hot words]
# Every message a consumer gets adopts a reference and, when its array is dropped, releases it
# (docs/protocol.md, "Claiming and releasing a reference"): three read-modify-writes on the
# header (the slot's count up; later the count down, then REFS down) and a few loads, beside the
# Queue's own (COUNT down, NOTICED). Through the general functions of _atomic.py (an int address
# converted through argtypes, a ctypes object per load, a Python function around each call)
# these were a tenth of a Python consumer's ~20 us a message. So a Header keeps, for the words a
# message touches, what the hot path calls directly: `w32`, the page as int32 words to load by
# index, and ctypes pointers (`refs_at`; the slot's, kept by its Segment) for _atomic.add_at,
# sub_at and cas; a Queue does the same for its words (_channels.py). Same instructions, same
# order, same sequentially consistent semantics: only the Python around them is less.
class Header:
    """Atomic access to the int32 words of a header mapped at `addr`."""

    __slots__ = ("addr", "w32", "refs_at")

    def __init__(self, addr):
        self.addr = addr
        self.w32 = A.words(addr, HEADER_BYTES // 4)
        self.refs_at = A.ptr(addr + 4 * W_REFS)

    def w(self, i):
        return self.addr + 4 * i

    def load(self, i):
        return A.load(self.w(i))

    def store(self, i, value):
        A.store(self.w(i), value)

    def init(self, pid, capacity):
        """A fresh header with one hold, by `pid`, in slot 0; the magic last (readers check it)."""
        A.store(self.w(W_VERSION), VERSION)
        A.store(self.w(W_PID), pid)
        A.store(self.w(W_CAP_LO), _i32(capacity % 2**32))
        A.store(self.w(W_CAP_HI), capacity // 2**32)
        A.store(self.w(W_SLOTS), pid)
        A.store(self.w(count_word(0)), 1)
        A.store(self.w(W_SLOTS_USED), 1)
        A.store(self.w(W_REFS), 1)
        A.store(self.w(W_MAGIC), _i32(MAGIC))
        return count_word(0)

    def valid(self):
        return A.load(self.w(W_MAGIC)) == _i32(MAGIC)

    def claim_slot(self, pid):
        """The count word of `pid`'s slot, claiming the first free one; -1 if all are taken."""
        i = 0
        while i < SLOTS:
            at = W_SLOTS + 2 * i
            p = A.load(self.w(at))
            if p == pid:
                return count_word(i)
            if p != 0:
                i += 1
                continue
            used = A.load(self.w(W_SLOTS_USED))
            while used < i + 1:  # counted in use before it is taken
                seen = A.compare_exchange(self.w(W_SLOTS_USED), used, i + 1)
                if seen == used:
                    break
                used = seen
            if A.compare_exchange(self.w(at), 0, pid) == 0:
                return count_word(i)
            # taken meanwhile: look at the same slot again
        return -1

    def slots_used(self):
        used = A.load(self.w(W_SLOTS_USED))
        return used if 0 < used <= SLOTS else SLOTS

    def holders(self):
        out = []
        for i in range(self.slots_used()):
            pid = A.load(self.w(W_SLOTS + 2 * i))
            if pid > 0:
                out.append((pid, A.load(self.w(count_word(i)))))
        return out

    def reclaim_slots(self, pid):
        """Frees every slot of dead `pid` and subtracts what it held from the total."""
        took = 0
        for i in range(self.slots_used()):
            p = W_SLOTS + 2 * i
            if A.load(self.w(p)) != pid or A.compare_exchange(self.w(p), pid, RECLAIMING) != pid:
                continue
            count = A.exchange(self.w(p + 1), 0)
            if count > 0:
                A.sub(self.w(W_REFS), count)
                took += count
            A.store(self.w(p), 0)
        return took

    def retain(self):
        """A reference for a message about to carry the segment."""
        return A.add(self.w(W_REFS), 1) + 1

    def release(self, slot, at):
        """Gives a hold back: lowers this process's slot count (`slot`, its pointer `at`) by one,
        never below zero (a compare-and-swap), then the total (this order: protocol.md); wakes a
        creator waiting for the total to reach 1. Returns what the total has left. One method
        for both, run once per message a consumer drops (NOTE [Hot words])."""
        w32 = self.w32
        if slot >= 0:
            cas = A.cas
            n = w32[slot]
            while n > 0 and not cas(at, n, n - 1):
                n = w32[slot]
        left = A.sub_at(self.refs_at, 1, A.SEQ_CST) - 1
        if left == 1 and w32[W_WAITING] != 0:
            A.futex_wake(self.w(W_REFS), 1)
        return left

    def drop_total(self):
        """Lowers the total by one (a reference no slot records); as release() otherwise."""
        return self.release(-1, None)


def _i32(v):
    v &= 0xFFFFFFFF
    return v - 2**32 if v >= 2**31 else v
