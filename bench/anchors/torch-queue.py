"""W1 anchor (YARDSTICK.md): torch.multiprocessing Queue, one producer process, one consumer.

Per message the producer makes a fresh float32 tensor of SIZE bytes, writes all of it
(torch.empty + fill_) and puts it on a bounded Queue (maxsize 64); the consumer gets it,
reads its first and last element and drops it. Prints one JSON line per strategy and size:
the consumer's seconds from its 2nd message of that size to the last.

    python3 torch-queue.py STRATEGY[,STRATEGY] [--one-pair] SIZE:COUNT [SIZE:COUNT ...]

A fresh pair of processes (start method spawn) for every strategy and size, as tensorproc's
side of W1 does; with --one-pair (tensorproc bench --quick) one pair serves every size of
every strategy in turn, since starting a pair costs two imports of torch, seconds, more than
a short run measures. The strategy is the producer's to choose, per tensor as it pickles
it (the consumer rebuilds what it is sent); between two strategies the producer waits until
the consumer has every tensor of the first, so that its queue's feeder thread has none left
to pickle under the wrong one.
"""
import json
import sys
import time

import torch
import torch.multiprocessing as mp

MAXSIZE = 64


def producer(q, plan, drained, done):
    for k, (strategy, size, count) in enumerate(plan):
        if k and strategy != plan[k - 1][0]:
            drained.get()
        mp.set_sharing_strategy(strategy)
        n = size // 4
        for i in range(count):
            t = torch.empty(n, dtype=torch.float32)
            t.fill_(i)
            q.put(t)
            del t
    # The consumer may still be mapping the last tensors: their producer must outlive them.
    done.wait()


def consumer(q, plan, out, drained):
    for k, (strategy, _, count) in enumerate(plan):
        mp.set_sharing_strategy(strategy)
        x = q.get()
        s = float(x[0]) + float(x[-1])
        del x
        t0 = time.perf_counter()
        for _ in range(count - 1):
            x = q.get()
            s += float(x[0]) + float(x[-1])
            del x
        out.put((time.perf_counter() - t0, s))
        if k + 1 < len(plan) and plan[k + 1][0] != strategy:
            drained.put(k)


def run(ctx, plan):
    q = ctx.Queue(maxsize=MAXSIZE)
    out = ctx.Queue()
    drained = ctx.Queue()
    done = ctx.Event()
    c = ctx.Process(target=consumer, args=(q, plan, out, drained))
    p = ctx.Process(target=producer, args=(q, plan, drained, done))
    c.start()
    p.start()
    for strategy, size, count in plan:
        seconds, _ = out.get()
        print(json.dumps({"impl": "torch " + strategy, "torch": torch.__version__, "bytes": size,
                          "count": count, "seconds": seconds}), flush=True)
    done.set()
    p.join()
    c.join()


if __name__ == "__main__":
    strategies = sys.argv[1].split(",")
    one_pair = "--one-pair" in sys.argv[2:]
    sizes = [tuple(int(x) for x in a.split(":")) for a in sys.argv[2:] if a != "--one-pair"]
    plan = [(s, size, count) for s in strategies for size, count in sizes]
    mp.set_sharing_strategy(strategies[0])
    ctx = mp.get_context("spawn")
    for part in [plan] if one_pair else [[x] for x in plan]:
        run(ctx, part)
