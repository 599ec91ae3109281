// A dataset's own resumable state in the loader's state dict (NOTE [Resumable datasets]): with
// 0 and 2 workers, map-style and iterable, inOrder true and false, the batches before a
// snapshot and those of the epoch resumed from it are the whole epoch, none twice, and each
// replica continues from its state after the last batch handed out from it.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const fixtures = new URL('./fixtures/loader-state.js', import.meta.url);
const target = (name: string, ...args: unknown[]) => ({ module: fixtures, export: name, args });

type Row = { i: number; served: number; worker: number };

/** The samples of each batch, as rows; stops after `stopAfter` batches (then takes the state). */
async function rows(loader: mp.DataLoader, stopAfter = Infinity): Promise<Row[][]> {
  const out: Row[][] = [];
  for await (const b of loader) {
    if (b instanceof mp.Tensor) {
      out.push((b.toArray() as number[]).map((i) => ({ i, served: -1, worker: -1 })));
    } else {
      const { i, served, worker } = b as { i: mp.Tensor; served: mp.Tensor; worker: mp.Tensor };
      const is = i.toArray() as number[];
      out.push(is.map((v, k) => ({ i: v, served: served.get(k) as number, worker: worker.get(k) as number })));
    }
    mp.releaseTensors(b);
    if (out.length >= stopAfter) break;
  }
  return out;
}

const n = 20;
const all = Array.from({ length: n }, (_, i) => i);

for (const kind of ['map', 'iterable'] as const) {
  for (const numWorkers of [0, 2]) {
    for (const inOrder of numWorkers === 0 ? [true] : [true, false]) {
      describe(`${kind}, numWorkers ${numWorkers}, inOrder ${inOrder}`, () => {
        test('the batches before the snapshot and the resumed epoch are the whole epoch, none twice', async () => {
          const mk = () =>
            new mp.DataLoader(target(kind === 'map' ? 'counted' : 'unrepeatable', n), {
              batchSize: 2,
              numWorkers,
              inOrder,
              ...(kind === 'map' ? { shuffle: true, seed: 11 } : {}),
            });
          const first = mk();
          const before = await rows(first, 3);
          const state = JSON.parse(JSON.stringify(first.stateDict())) as mp.DataLoaderState;
          assert.equal(state.replicas?.length, Math.max(1, numWorkers), 'one dataset state per replica');
          const resumed = mk();
          resumed.loadStateDict(state);
          const after = await rows(resumed);
          const seen = [...before, ...after].flat();
          assert.deepEqual(
            seen.map((r) => r.i).sort((a, b) => a - b),
            all,
            'every sample once',
          );
          if (kind === 'map') {
            // Each replica's count goes on from its state after the last batch handed out from
            // it: per worker, the counts seen are 0, 1, 2, … with neither gap nor repeat.
            for (const w of new Set(seen.map((r) => r.worker))) {
              const counts = seen.filter((r) => r.worker === w).map((r) => r.served);
              assert.deepEqual(
                counts.sort((a, b) => a - b),
                counts.map((_, k) => k),
                `worker ${w}'s counts`,
              );
            }
          }
          // The state after the resumed epoch's end is the start of the next: loaded, a whole epoch.
          const next = mk();
          next.loadStateDict(resumed.stateDict());
          assert.deepEqual(
            (await rows(next))
              .flat()
              .map((r) => r.i)
              .sort((a, b) => a - b),
            all,
          );
        });
      });
    }
  }
}

describe('a dataset state and numWorkers', () => {
  test('a state with per-worker dataset states loads only with the same numWorkers', async () => {
    const first = new mp.DataLoader(target('counted', n), { batchSize: 2, numWorkers: 2 });
    await rows(first, 2);
    const state = first.stateDict();
    const other = new mp.DataLoader(target('counted', n), { batchSize: 2 });
    await other.ready();
    assert.throws(
      () => other.loadStateDict(state),
      (e: unknown) =>
        e instanceof mp.BadStateDictError && e.code === 'ERR_TP_BAD_STATE_DICT' && /numWorkers 2 \(this loader's: 0\)/.test(e.message),
    );
  });
});
