"""W2 anchor (YARDSTICK.md): torch.multiprocessing.spawn of N processes that do nothing,
joined. Each child of start method spawn imports this module again, and with it torch,
as every torch program's children do. With WARMUP 1, one untimed start per N first (the
first start pays for disk caches), then TRIALS timed starts. One JSON line per trial.

    python3 torch-spawn.py TRIALS WARMUP N [N ...]
"""
import json
import sys
import time

import torch
import torch.multiprocessing as mp


def noop(i):
    pass


if __name__ == "__main__":
    trials, warmup = int(sys.argv[1]), sys.argv[2] == "1"
    for n in (int(x) for x in sys.argv[3:]):
        if warmup:
            mp.spawn(noop, nprocs=n, join=True)
        for trial in range(trials):
            t0 = time.perf_counter()
            mp.spawn(noop, nprocs=n, join=True)
            print(json.dumps({"impl": "torch spawn", "torch": torch.__version__, "n": n, "trial": trial,
                              "seconds": time.perf_counter() - t0}), flush=True)
