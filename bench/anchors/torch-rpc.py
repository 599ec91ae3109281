"""W5 (b) anchor (YARDSTICK.md): torch.distributed.rpc (TensorPipe) moving a tensor to another host.

Rank 0 (the caller) sends a float32 tensor of SIZE bytes to rank 1 with rpc_sync COUNT times;
rank 1 returns its byte count. TensorPipe is held to its TCP transport and basic channel
(_transports=['uv'], _channels=['basic']): the two ranks share a machine here, and its shared
memory and cross-memory-attach paths would not cross the network the test puts between them.
Rank 0 prints one JSON line: {"bytes", "count", "seconds"} (after one warm-up call).

    python3 torch-rpc.py RANK MASTER_ADDR MASTER_PORT SIZE:COUNT [SIZE:COUNT ...]

Rank 1 is started in the other host's network namespace (ip netns exec NS python3 ...),
MASTER_ADDR an address of rank 0's that it reaches.
"""
import json
import os
import sys
import time

import torch
import torch.distributed.rpc as rpc


def nbytes(t):
    return t.numel() * t.element_size()


def main():
    rank = int(sys.argv[1])
    os.environ["MASTER_ADDR"] = sys.argv[2]
    os.environ["MASTER_PORT"] = sys.argv[3]
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=4, rpc_timeout=120, _transports=["uv"], _channels=["basic"])
    rpc.init_rpc(f"w{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    if rank == 0:
        for spec in sys.argv[4:]:
            size, count = (int(x) for x in spec.split(":"))
            t = torch.ones(size // 4, dtype=torch.float32)
            rpc.rpc_sync("w1", nbytes, args=(t,))
            t0 = time.perf_counter()
            for _ in range(count):
                assert rpc.rpc_sync("w1", nbytes, args=(t,)) == size
            print(json.dumps({"bytes": size, "count": count, "seconds": time.perf_counter() - t0}), flush=True)
    rpc.shutdown()


if __name__ == "__main__":
    main()
