// Memory with workers: a released batch's segment comes back to the worker that made it and
// carries a later batch (a handful of segments serve any number of batches), under both
// sharing strategies; resident memory of the main process and of the workers stays flat
// over 20 epochs; nothing is left in /dev/shm or open after close(); the workers' heap is
// kept by glibc (NOTE [Worker malloc]).
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as mp from '../../src/index.js';
import { checkLeaks, shmSegments } from '../helpers/leaks.js';
import { segmentOf } from '../helpers/segments.js';
import { waitFor } from '../helpers/wait.js';

checkLeaks();

const fixtures = new URL('./fixtures/datasets.js', import.meta.url);
const target = (name: string, ...args: unknown[]) => ({ module: fixtures, export: name, args });

function rssBytes(pid: number | 'self'): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
  return Number(m![1]) * 1024;
}

describe('DataLoader memory with workers', () => {
  for (const strategy of ['file_descriptor', 'file_system'] as const) {
    test(`${strategy}: released batches' segments are reused by their workers`, async () => {
      const before = mp.getSharingStrategy();
      mp.setSharingStrategy(strategy);
      try {
        const numWorkers = 2,
          prefetchFactor = 2;
        const loader = new mp.DataLoader(target('megabytes', 64), { batchSize: 2, numWorkers, prefetchFactor, persistentWorkers: true });
        const segments = new Set<string>();
        let batches = 0;
        for (let e = 0; e < 2; e++) {
          for await (const b of loader) {
            using batch = b as mp.Tensor & Disposable;
            assert.equal(batch.get(1, 0), 2 * (batches % 32) + 1);
            segments.add(segmentOf(batch).key);
            batches++;
          }
        }
        assert.equal(batches, 64);
        // Each worker has at most prefetchFactor batches on their way and one it is filling;
        // a segment the main process just released may still be on its way back.
        assert.ok(segments.size <= numWorkers * (prefetchFactor + 2), `${segments.size} segments for ${batches} batches`);
        const pids = loader.workerPids;
        assert.equal(pids.length, 2);
        await loader.close();
        // The workers' named segments went with them (the main process had released its batches).
        const theirs = () => shmSegments().filter((n) => pids.some((p) => n.startsWith(`tensorproc_${p}_`)));
        if (strategy === 'file_system') await waitFor(() => theirs().length === 0);
      } finally {
        mp.setSharingStrategy(before);
      }
    });
  }

  test('resident memory of the main process and of each worker is flat over 20 epochs', async () => {
    const loader = new mp.DataLoader(target('megabytes', 24), {
      batchSize: 4,
      numWorkers: 2,
      persistentWorkers: true,
      shuffle: true,
      seed: 1,
    });
    const series: number[][] = []; // per epoch: main, worker 0, worker 1
    for (let e = 1; e <= 20; e++) {
      for await (const b of loader) {
        using batch = b as mp.Tensor & Disposable;
        assert.deepEqual(batch.shape, [4, 2 ** 18]);
      }
      series.push([rssBytes('self'), ...loader.workerPids.map(rssBytes)]);
    }
    // The heaps rise and fall with the garbage collector (the samples are private 1 MiB
    // buffers); a leak rises for good. 20 epochs of 6 batches of 4 MiB: a batch's segment
    // kept anywhere would add 24 MiB an epoch, so the least of the last ten epochs would be
    // far above the most of the first ten.
    for (let k = 0; k < 3; k++) {
      const early = Math.max(...series.slice(0, 10).map((r) => r[k]!));
      const late = Math.min(...series.slice(10).map((r) => r[k]!));
      const grew = (late - early) / 2 ** 20;
      assert.ok(
        grew < 8,
        `${k === 0 ? 'main process' : `worker ${k - 1}`}: ${grew.toFixed(1)} MiB more at its lowest in epochs 11-20 than at its highest in 1-10`,
      );
    }
    await loader.close();
  });

  test("process workers start with glibc keeping their freed heap and streaming large copies (NOTE [Worker malloc], NOTE [Streaming copies]); a user's own tunables are kept as they are", async () => {
    const seen = async (): Promise<string[]> => {
      const out: string[] = [];
      for await (const b of new mp.DataLoader(target('tunables', 4), { batchSize: null, numWorkers: 2 })) out.push(b as string);
      return out;
    };
    const malloc = 'glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=134217728';
    const stream = 'glibc.cpu.x86_non_temporal_threshold=524288';
    const saved = process.env.GLIBC_TUNABLES;
    try {
      delete process.env.GLIBC_TUNABLES;
      assert.deepEqual(await seen(), new Array(4).fill(`${malloc}:${stream}`));
      assert.equal(process.env.GLIBC_TUNABLES, undefined, "this process's environment is left as it was");
      process.env.GLIBC_TUNABLES = 'glibc.rtld.optional_static_tls=4096';
      assert.deepEqual(await seen(), new Array(4).fill(`glibc.rtld.optional_static_tls=4096:${malloc}:${stream}`));
      process.env.GLIBC_TUNABLES = 'glibc.malloc.arena_max=1';
      assert.deepEqual(await seen(), new Array(4).fill(`glibc.malloc.arena_max=1:${stream}`));
      assert.equal(process.env.GLIBC_TUNABLES, 'glibc.malloc.arena_max=1');
      process.env.GLIBC_TUNABLES = 'glibc.cpu.x86_non_temporal_threshold=1048576:glibc.malloc.arena_max=1';
      assert.deepEqual(await seen(), new Array(4).fill('glibc.cpu.x86_non_temporal_threshold=1048576:glibc.malloc.arena_max=1'));
    } finally {
      if (saved === undefined) delete process.env.GLIBC_TUNABLES;
      else process.env.GLIBC_TUNABLES = saved;
    }
  });
});
