"""W3 mixed anchor (YARDSTICK.md, added 2026-12-04): CPython's multiprocessing.Pool of 2
(spawn), warmed with 100 tasks. First one free worker's time for COUNT short tasks (about
1 ms of CPU each): one chunk of all of them, which one worker runs. Then, for each case, one
worker is held by a long task (a CPU spin until an Event is set, at most HOLD_MS) and the
COUNT short tasks go through map at the default chunksize, at chunksize 1, and through imap;
the long task is released once they are done. One JSON line per measurement (seconds).

    python3 cpython-pool-mixed.py TRIALS [COUNT HOLD_MS]
"""
import json
import multiprocessing as mp
import sys
import time

_started = None
_release = None


def init(started, release):
    global _started, _release
    _started, _release = started, release


def spin(x):
    end = time.perf_counter() + 0.001
    while time.perf_counter() < end:
        pass
    return x


def hold(ms):
    _started.set()
    end = time.perf_counter() + ms / 1000
    while not _release.is_set() and time.perf_counter() < end:
        pass
    return ms


def emit(case, count, seconds):
    print(json.dumps({"impl": "CPython", "case": case, "tasks": count, "seconds": seconds}), flush=True)


CASES = [
    ("map, default chunksize", lambda pool, items: pool.map(spin, items)),
    ("map, chunksize 1", lambda pool, items: pool.map(spin, items, chunksize=1)),
    ("imap", lambda pool, items: list(pool.imap(spin, items))),
]

if __name__ == "__main__":
    trials = int(sys.argv[1])
    count, hold_ms = (int(a) for a in sys.argv[2:4]) if len(sys.argv) > 3 else (1000, 3000)
    ctx = mp.get_context("spawn")
    started, release = ctx.Event(), ctx.Event()
    with ctx.Pool(2, initializer=init, initargs=(started, release)) as pool:
        pool.map(spin, range(100))
        items = list(range(count))
        for _ in range(trials):
            t0 = time.perf_counter()
            pool.map(spin, items, chunksize=count)
            emit("one free worker", count, time.perf_counter() - t0)
            for name, run in CASES:
                started.clear()
                release.clear()
                held = pool.apply_async(hold, (hold_ms,))
                started.wait()
                t0 = time.perf_counter()
                out = run(pool, items)
                emit(name, count, time.perf_counter() - t0)
                assert list(out) == items
                release.set()
                held.get()
