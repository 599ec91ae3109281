"""W4 anchor (shared/YARDSTICK.md): torch.utils.data.DataLoader, batches of 32 samples of
3x224x224 float32 written in full (torch.empty + fill_), 40 batches, shuffled; epoch 1 with
worker start-up, epoch 2 with persistent workers. Optional WORK_MS of CPU work per sample (a
spin), the same as bench/lib/w4-dataset.ts. Prints one JSON line per (workers, epoch).

Run with Debian's python3 (python3-torch):
    /usr/bin/python3 bench/anchors/torch-dataloader.py [workers=0,2] [work_ms=0]
"""
import json
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

BATCH, BATCHES = 32, 40


class Synthetic(Dataset):
    def __init__(self, n, work_ms):
        self.n = n
        self.work_s = work_ms / 1000.0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = torch.empty(3, 224, 224)
        x.fill_(i % 255 / 255.0)
        if self.work_s > 0:
            end = time.perf_counter() + self.work_s
            while time.perf_counter() < end:
                pass
        return x, i % 10


def main():
    workers = [int(w) for w in (sys.argv[1] if len(sys.argv) > 1 else "0,2").split(",")]
    work_ms = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    for w in workers:
        dl = DataLoader(Synthetic(BATCH * BATCHES, work_ms), batch_size=BATCH, shuffle=True, num_workers=w,
                        persistent_workers=bool(w), multiprocessing_context="spawn" if w else None)
        for epoch in (1, 2):
            t0 = time.perf_counter()
            nb = 0
            for x, y in dl:
                assert x.shape == (BATCH, 3, 224, 224)
                nb += 1
            dt = time.perf_counter() - t0
            print(json.dumps({"workload": "W4", "impl": "torch " + torch.__version__, "workers": w, "work_ms": work_ms,
                              "epoch": epoch, "batches": nb, "batches_per_s": round(nb / dt, 1)}), flush=True)
        del dl


if __name__ == "__main__":
    main()
