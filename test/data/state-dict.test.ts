// A state dict carries the identity of its loader (NOTE [Whose state dict]): loaded into a
// loader that differs in dataset kind or length, batchSize, dropLast, sampler kind or length,
// or (where it matters) numWorkers, it is refused with a message naming each difference; a
// state from the same loader still loads and resumes exactly.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { isCoded, throwsCoded } from '../helpers/errors.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const fixtures = new URL('./fixtures/datasets.js', import.meta.url);
const target = (name: string, ...args: unknown[]) => ({ module: fixtures, export: name, args });
const items = (n: number) => Array.from({ length: n }, (_, i) => i);

async function batches(loader: AsyncIterable<unknown>, stopAfter = Infinity): Promise<number[][]> {
  const out: number[][] = [];
  for await (const b of loader) {
    out.push(b instanceof mp.Tensor ? (b.toArray() as number[]) : [b as number]); // a tensor, or a custom collate's number
    mp.releaseTensors(b);
    if (out.length >= stopAfter) break;
  }
  return out;
}

/** The state of `loader` after `k` batches of its first epoch. */
async function stateAfter(loader: mp.DataLoader, k: number): Promise<mp.DataLoaderState> {
  await batches(loader, k);
  return JSON.parse(JSON.stringify(loader.stateDict()));
}

/** Loading `state` into `loader` throws a BadStateDictError whose message names each of `named`. */
function refused(loader: mp.DataLoader, state: mp.DataLoaderState, ...named: string[]): void {
  const e = throwsCoded(() => loader.loadStateDict(state), mp.BadStateDictError, 'ERR_TP_BAD_STATE_DICT');
  for (const n of named) assert.ok(e.message.includes(n), `${JSON.stringify(n)} is not in: ${e.message}`);
}

describe('a state dict from another loader is refused', () => {
  test("issue 24's case: a 7-item, batch-3 state into a 40-item, batch-4 shuffled loader; that loader's epoch stays whole", async () => {
    const state = await stateAfter(new mp.DataLoader(items(7), { batchSize: 3 }), 1);
    const other = new mp.DataLoader(items(40), { batchSize: 4, shuffle: true, seed: 2 });
    refused(
      other,
      state,
      "dataset length 7 (this loader's: 40)",
      "batchSize 3 (this loader's: 4)",
      "sampler SequentialSampler (this loader's: RandomSampler)",
      "sampler length 7 (this loader's: 40)",
    );
    const epoch = await batches(other);
    assert.equal(epoch.length, 10);
    assert.deepEqual(
      epoch.flat().sort((a, b) => a - b),
      items(40),
    );
  });

  test('each identifying field alone: dataset length, batchSize, dropLast, sampler kind, sampler length, dataset kind', async () => {
    const fixed = [0, 1, 2, 3, 4, 5];
    const s1 = await stateAfter(new mp.DataLoader(items(10), { batchSize: 2, sampler: fixed }), 1);
    refused(new mp.DataLoader(items(12), { batchSize: 2, sampler: fixed }), s1, "dataset length 10 (this loader's: 12)");

    const s2 = await stateAfter(new mp.DataLoader(items(10), { batchSize: 2 }), 1);
    refused(new mp.DataLoader(items(10), { batchSize: 3 }), s2, "batchSize 2 (this loader's: 3)");

    const s3 = await stateAfter(new mp.DataLoader(items(10), { batchSize: 3 }), 1);
    refused(new mp.DataLoader(items(10), { batchSize: 3, dropLast: true }), s3, "dropLast false (this loader's: true)");

    const s4 = await stateAfter(new mp.DataLoader(items(10), { batchSize: 2, seed: 1 }), 1);
    refused(
      new mp.DataLoader(items(10), { batchSize: 2, shuffle: true, seed: 1 }),
      s4,
      "sampler SequentialSampler (this loader's: RandomSampler)",
    );

    const rs = (numSamples: number) => new mp.RandomSampler(10, { numSamples, generator: new mp.Generator(4) });
    const s5 = await stateAfter(new mp.DataLoader(items(10), { batchSize: 2, sampler: rs(6) }), 1);
    refused(new mp.DataLoader(items(10), { batchSize: 2, sampler: rs(8) }), s5, "sampler length 6 (this loader's: 8)");

    const bs = new mp.BatchSampler(new mp.SequentialSampler(10), 2);
    const s6 = await stateAfter(new mp.DataLoader(items(10), { batchSampler: bs }), 1);
    refused(
      new mp.DataLoader(items(10), { batchSize: 2 }),
      s6,
      "sampler BatchSampler(SequentialSampler) (this loader's: SequentialSampler)",
    );

    const stream = new mp.DataLoader(target('stream', 10), { batchSize: 2 });
    const s7 = await stateAfter(stream, 1);
    refused(new mp.DataLoader(items(10), { batchSize: 2 }), s7, "dataset kind iterable (this loader's: map)");
  });

  test('numWorkers counts for an iterable dataset, not for a map-style one', async () => {
    const s = await stateAfter(new mp.DataLoader(target('stream', 10), { batchSize: 2 }), 1);
    const withWorkers = new mp.DataLoader(target('stream', 10), { batchSize: 2, numWorkers: 2 });
    await withWorkers.ready(); // builds the dataset here; no worker starts before an iteration
    refused(withWorkers, s, "numWorkers 0 (this loader's: 2)");

    const m = await stateAfter(new mp.DataLoader(target('squares', 10), { batchSize: 2, collate: target('sumY') }), 2);
    const mapWorkers = new mp.DataLoader(target('squares', 10), { batchSize: 2, collate: target('sumY'), numWorkers: 2 });
    await mapWorkers.ready();
    mapWorkers.loadStateDict(m); // a map-style epoch resumes with any number of workers
    const rest: unknown[] = [];
    for await (const b of mapWorkers) rest.push(b);
    assert.deepEqual(rest, [4 + 5, 6 + 7, 8 + 9]);
  });

  test('a dataset target not built yet: the state is checked as the next iteration begins', async () => {
    const state = await stateAfter(new mp.DataLoader(items(7), { batchSize: 3 }), 1);
    const later = new mp.DataLoader(target('squares', 40), { batchSize: 4 });
    later.loadStateDict(state);
    const count = async () => {
      let n = 0;
      for await (const b of later) {
        mp.releaseTensors(b);
        n++;
      }
      return n;
    };
    await assert.rejects(count(), isCoded(mp.BadStateDictError, 'ERR_TP_BAD_STATE_DICT'));
    assert.equal(await count(), 10, 'the refused state is dropped: the next epoch is whole');
  });

  test('format 1 (no identity) and a malformed identity are refused; the same loader still resumes exactly', async () => {
    const opts = { batchSize: 3, shuffle: true, seed: 9 };
    const whole = await batches(new mp.DataLoader(items(20), opts));
    const state = await stateAfter(new mp.DataLoader(items(20), opts), 2);
    const l = new mp.DataLoader(items(20), opts);
    const { loader: _, ...noIdentity } = state;
    refused(l, { ...noIdentity, format: 'tensorproc.DataLoader/1' } as unknown as mp.DataLoaderState, 'format 1');
    refused(l, noIdentity as unknown as mp.DataLoaderState, '`loader`');
    refused(l, { ...state, loader: { ...state.loader, batchSize: 0 } }, '`loader`');
    l.loadStateDict(state);
    assert.deepEqual(await batches(l), whole.slice(2));
  });
});
