"""W3 anchor (YARDSTICK.md): torch.multiprocessing's Pool (CPython's multiprocessing.Pool,
tensors reduced to shared memory) of 2 processes, start method spawn, warmed with 100 tiny
tasks. Then, TRIALS times: map of 20,000 tiny tasks (x -> x*x) at chunksize 1, 200,000 at
the default chunksize, and 500 tasks that each return a fresh 1 MiB float32 tensor, filled.
One JSON line per measurement.

    python3 torch-pool.py TRIALS [tiny,default,tensor]
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


if __name__ == "__main__":
    trials = int(sys.argv[1])
    cases = sys.argv[2].split(",") if len(sys.argv) > 2 else ["tiny", "default", "tensor"]
    with mp.get_context("spawn").Pool(2) as pool:
        pool.map(square, range(100))
        for _ in range(trials):
            if "tiny" in cases:
                t0 = time.perf_counter()
                pool.map(square, range(20000), chunksize=1)
                emit("tiny, chunksize 1", 20000, time.perf_counter() - t0)
            if "default" in cases:
                t0 = time.perf_counter()
                pool.map(square, range(200000))
                emit("tiny, default chunksize", 200000, time.perf_counter() - t0)
            if "tensor" in cases:
                t0 = time.perf_counter()
                out = pool.map(fresh_tensor, range(500))
                seconds = time.perf_counter() - t0
                assert float(out[-1][0]) == 499 and float(out[-1][-1]) == 499
                del out
                emit("1 MiB tensor results", 500, seconds)
