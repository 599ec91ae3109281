"""The Python half of examples/python/score-images.ts: a PyTorch model scoring the batches a
Node DataLoader makes, reading them and writing its scores over Node's shared memory.

    .venv/bin/python examples/python/score_images.py   (after `node dist/examples/python/score-images.js`)
"""
import sys

import tensorproc

try:
    import torch
except ImportError:
    sys.exit("score_images.py needs torch (apt-get install python3-torch, then the README's venv)")

torch.manual_seed(0)
model = torch.nn.Sequential(  # any model: this one is small and untrained
    torch.nn.Conv2d(3, 8, 3, padding=1),
    torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1),
    torch.nn.Flatten(),
    torch.nn.Linear(8, 1),
).eval()

batches = tensorproc.attach("tp-example-batches", timeout=60.0)
done = tensorproc.attach("tp-example-done", timeout=60.0)
n = 0
with torch.no_grad():
    while (work := batches.get()) is not None:
        images = tensorproc.to_torch(work["images"])  # Node's batch, no copy
        scores = tensorproc.to_torch(work["scores"])  # Node's tensor: written in place
        scores.copy_(model(images).view(-1))
        del images, scores
        tensorproc.release(work["images"])
        tensorproc.release(work["scores"])
        done.put(work["i"])
        n += 1
print(f"score_images.py: scored {n} batches")
