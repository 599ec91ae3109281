# W5's anchor (bench/cuda.ts): PyTorch's own torch.multiprocessing Queue moving CUDA tensors
# between two processes, a fresh tensor per message, the consumer reading its first element;
# then a host-to-device copy from pageable against pinned memory. One JSON line per result.
# From the research brief's torch_anchor.py (docs/cuda.md), with bench/cuda.ts's sizes.
import json, sys, time
import torch
import torch.multiprocessing as mp

QUICK = "--quick" in sys.argv
MiB = 1 << 20
SIZES = [MiB, 64 * MiB] if QUICK else [MiB, 64 * MiB, 1024 * MiB]
COUNTS = {MiB: 100 if QUICK else 500, 64 * MiB: 20 if QUICK else 100, 1024 * MiB: 20}


def consumer(q, back):
    torch.cuda.init()
    while True:
        t = q.get()
        if t is None:
            break
        v = float(t[0].item())
        del t
        back.put(v)


def emit(o):
    print(json.dumps({"bench": "W5", "impl": "torch", "torch": torch.__version__, **o}), flush=True)


def main():
    if not torch.cuda.is_available():
        print("no CUDA torch", file=sys.stderr)
        return 1
    ctx = mp.get_context("spawn")
    q, back = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=consumer, args=(q, back))
    p.start()
    warm = torch.ones(256, device="cuda")
    q.put(warm); back.get(); del warm
    for size in SIZES:
        n = COUNTS[size]
        first = 0.0
        t0 = time.perf_counter()
        for i in range(n):
            t = torch.full((size // 4,), float(i), device="cuda")
            torch.cuda.synchronize()
            s = time.perf_counter()
            q.put(t)
            del t
            v = back.get()
            assert v == i, (v, i)
            if i == 0:
                first = time.perf_counter() - s
        total = time.perf_counter() - t0
        torch.cuda.ipc_collect()
        emit({"case": "handoff", "bytes": size, "messages": n, "msgs_per_s": round(n / total, 1),
              "first_latency_ms": round(first * 1e3, 3)})
    q.put(None)
    p.join(10)
    nbytes = (16 if QUICK else 256) * MiB
    reps = 3 if QUICK else 10
    for impl, host in (("pageable", torch.ones(nbytes // 4)), ("pinned", torch.ones(nbytes // 4).pin_memory())):
        host.to("cuda"); torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            host.to("cuda")
        torch.cuda.synchronize()
        s = (time.perf_counter() - t0) / reps
        emit({"case": "h2d", "pinned": impl, "bytes": nbytes, "gb_per_s": round(nbytes / s / 1e9, 2)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
