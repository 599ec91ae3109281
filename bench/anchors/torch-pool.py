"""W3 anchor (YARDSTICK.md): torch.multiprocessing's Pool (CPython's multiprocessing.Pool,
tensors reduced to shared memory) of 2 processes, start method spawn, warmed with 100 tiny
tasks. Then, TRIALS times: map of TINY tiny tasks (x -> x*x) at chunksize 1, DEFAULT at the
default chunksize, and TENSOR tasks that each return a fresh 1 MiB float32 tensor, filled
(the yardstick's counts: 20,000, 200,000 and 500). One JSON line per measurement.

    python3 torch-pool.py TRIALS [TINY DEFAULT TENSOR]     (a count of 0 leaves its case out)
    python3 torch-pool.py --first CHUNKSIZE|default COUNT

With --first, one tiny case is timed as a user's first call, as tensorproc's are
(bench/lib/w3-first-call.ts, YARDSTICK.md "How a call is timed"): in this fresh process, a
pool of 2 warmed with 100 tasks, then the one big map. A pool kept across trials times its
later, warmer maps instead (measured here 2026-12-06: the default-chunksize map after a
20,000-task map took 72 ms against a first call's 105 ms).
"""
import json
import sys
import time

import torch
import torch.multiprocessing as mp


def square(x):
    return x * x


def fresh_tensor(i):
    t = torch.empty(1 << 18)  # 1 MiB of float32
    t.fill_(i)
    return t


def emit(case, tasks, seconds):
    print(json.dumps({"impl": "torch", "torch": torch.__version__, "case": case, "tasks": tasks,
                      "tasks_per_s": tasks / seconds}), flush=True)


def first_call(chunksize, count):
    with mp.get_context("spawn").Pool(2) as pool:
        pool.map(square, range(100))
        t0 = time.perf_counter()
        out = pool.map(square, range(count), **({} if chunksize is None else {"chunksize": chunksize}))
        seconds = time.perf_counter() - t0
        assert out[-1] == (count - 1) ** 2
    emit("tiny, default chunksize" if chunksize is None else "tiny, chunksize %d" % chunksize, count, seconds)


if __name__ == "__main__":
    if sys.argv[1] == "--first":
        first_call(None if sys.argv[2] == "default" else int(sys.argv[2]), int(sys.argv[3]))
        sys.exit(0)
    trials = int(sys.argv[1])
    tiny, default, tensor = (int(a) for a in sys.argv[2:5]) if len(sys.argv) > 4 else (20000, 200000, 500)
    with mp.get_context("spawn").Pool(2) as pool:
        pool.map(square, range(100))
        for _ in range(trials):
            if tiny:
                t0 = time.perf_counter()
                out = pool.map(square, range(tiny), chunksize=1)
                emit("tiny, chunksize 1", tiny, time.perf_counter() - t0)
                assert out[-1] == (tiny - 1) ** 2
            if default:
                t0 = time.perf_counter()
                out = pool.map(square, range(default))
                emit("tiny, default chunksize", default, time.perf_counter() - t0)
                assert out[-1] == (default - 1) ** 2
            if not tensor:
                continue
            t0 = time.perf_counter()
            out = pool.map(fresh_tensor, range(tensor))
            seconds = time.perf_counter() - t0
            assert float(out[-1][0]) == tensor - 1 and float(out[-1][-1]) == tensor - 1
            del out
            emit("1 MiB tensor results", tensor, seconds)
