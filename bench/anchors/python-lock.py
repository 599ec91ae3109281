"""Anchor of the sync bench (bench/sync.ts): CPython's multiprocessing locks, which
torch.multiprocessing re-exports unchanged. Uncontended, in one process (the best of 9 timed
repetitions after a warm-up of as many calls): acquire()+release(), `with lock:`, RLock and
Semaphore; contended: a counter (a RawValue, read then written) incremented N times by each of
2 processes under one Lock, timed from a Barrier that starts them to the last one's end (both
on CLOCK_MONOTONIC). One JSON line per figure, in bench/lib/record.ts's BenchRecord shape.

    python3 python-lock.py uncontended ITERATIONS
    python3 python-lock.py contended ITERATIONS_PER_PROCESS
"""
import json
import multiprocessing as mp
import platform
import sys
import time

IMPL = "python multiprocessing"


def emit(case, value, unit, better, count):
    print(json.dumps({"impl": IMPL, "case": case, "value": value, "unit": unit, "better": better,
                      "count": count, "python": platform.python_version()}), flush=True)


REPS = 9


def ns_per_op(fn, n):
    """A warm-up of n calls, then the best of REPS timed repetitions of n / REPS (as timeit, and bench/sync.ts)."""
    fn(n)
    per = -(-n // REPS)
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter_ns()
        fn(per)
        times.append((time.perf_counter_ns() - t0) / per)
    return min(times)


def uncontended(n):
    lock, rlock, sem = mp.Lock(), mp.RLock(), mp.Semaphore(1)

    def explicit(k, l=lock):
        for _ in range(k):
            l.acquire()
            l.release()

    def scoped(k):
        for _ in range(k):
            with lock:
                pass

    def rlocked(k):
        for _ in range(k):
            rlock.acquire()
            rlock.release()

    def semaphore(k):
        for _ in range(k):
            sem.acquire()
            sem.release()

    emit("Lock acquire+release", ns_per_op(explicit, n), "ns", "lower", n)
    emit("Lock scope (with / using holdSync)", ns_per_op(scoped, n), "ns", "lower", n)
    emit("RLock acquire+release", ns_per_op(rlocked, n), "ns", "lower", n)
    emit("Semaphore acquire+release", ns_per_op(semaphore, n), "ns", "lower", n)


def count(lock, counter, barrier, ends, i, n):
    barrier.wait()
    for _ in range(n):
        lock.acquire()
        counter.value += 1
        lock.release()
    ends[i] = time.monotonic_ns()


def contended(n):
    ctx = mp.get_context("fork")
    lock = ctx.Lock()
    counter = ctx.RawValue("i", 0)
    ends = ctx.RawArray("q", 2)
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=count, args=(lock, counter, barrier, ends, i, n)) for i in range(2)]
    for p in procs:
        p.start()
    barrier.wait()
    t0 = time.monotonic_ns()
    for p in procs:
        p.join()
    if counter.value != 2 * n:
        raise SystemExit(f"the counter ended at {counter.value}, not {2 * n}")
    seconds = (max(ends) - t0) / 1e9
    emit("contended counter, 2 processes", 2 * n / seconds, "ops/s", "higher", 2 * n)


if __name__ == "__main__":
    mode, n = sys.argv[1], int(sys.argv[2])
    uncontended(n) if mode == "uncontended" else contended(n)
