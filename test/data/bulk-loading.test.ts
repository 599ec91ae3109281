// batchSize null with a sampler of lists of indices (torch's bulk loading,
// test_bulk_loading_nobatch): each list reaches getItem whole, once per sampler element.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const fixtures = new URL('./fixtures/loader-state.js', import.meta.url);

/** torch's BulkLoadingSampler: a random permutation of the dataset cut into lists of `size`. */
function bulkSampler(n: number, size: number, seed: number): mp.Sampler<number[]> {
  const g = new mp.Generator(seed);
  return {
    length: Math.ceil(n / size),
    *[Symbol.iterator]() {
      const perm = [...g.randperm(n)];
      for (let k = 0; k < n; k += size) yield perm.slice(k, k + size);
    },
  };
}

describe('batchSize null with a sampler of lists (bulk loading)', () => {
  for (const numWorkers of [0, 2]) {
    test(`numWorkers ${numWorkers}: each list reaches getItem whole, in sampler order, every index once`, async () => {
      const n = 35;
      const expected = [...bulkSampler(n, 4, 3)];
      const loader = new mp.DataLoader(
        { module: fixtures, export: 'bulk', args: [n] },
        { batchSize: null, sampler: bulkSampler(n, 4, 3), numWorkers },
      );
      await loader.ready();
      assert.equal(loader.length, 9);
      const got: { got: number[]; list: boolean; worker: number }[] = [];
      for await (const b of loader) got.push(b as (typeof got)[number]);
      assert.equal(got.length, expected.length, 'one getItem call per sampler element');
      assert.ok(got.every((b) => b.list));
      assert.deepEqual(
        got.map((b) => b.got),
        expected,
      );
      assert.deepEqual(
        got.flatMap((b) => b.got).sort((a, b) => a - b),
        Array.from({ length: n }, (_, i) => i),
      );
      const workers = new Set(got.map((b) => b.worker));
      assert.deepEqual([...workers].sort(), numWorkers === 0 ? [-1] : [0, 1]);
    });
  }
});
