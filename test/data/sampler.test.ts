// The seeded generator and the samplers, in one process: properties checked with fast-check
// over many lengths, batch sizes and seeds, and torch's examples as fixed cases.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import * as mp from 'tensorproc';
import { throwsCoded } from '../helpers/errors.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const seed = fc.integer({ min: 0, max: 2 ** 52 - 1 });

describe('Generator', () => {
  test('the same seed gives the same stream; another seed another one', () => {
    fc.assert(
      fc.property(seed, (s) => {
        const a = new mp.Generator(s);
        const b = new mp.Generator(s);
        const xs = Array.from({ length: 8 }, () => a.nextUint32());
        assert.deepEqual(
          Array.from({ length: 8 }, () => b.nextUint32()),
          xs,
        );
        const c = new mp.Generator(s === 0 ? 1 : s - 1);
        assert.notDeepEqual(
          Array.from({ length: 8 }, () => c.nextUint32()),
          xs,
        );
        assert.equal(a.initialSeed(), s);
      }),
    );
  });

  test('getState/setState resumes the stream exactly', () => {
    fc.assert(
      fc.property(seed, fc.nat(50), (s, skip) => {
        const g = new mp.Generator(s);
        for (let i = 0; i < skip; i++) g.nextUint32();
        const state = g.getState();
        const next = [g.random(), g.randint(7), g.seed()];
        const h = new mp.Generator(0).setState(JSON.parse(JSON.stringify(state)));
        assert.deepEqual([h.random(), h.randint(7), h.seed()], next);
      }),
    );
  });

  test('random() in [0, 1); randint(n) in [0, n); seed() a safe integer below 2**52', () => {
    fc.assert(
      fc.property(seed, fc.integer({ min: 1, max: 2 ** 32 }), (s, n) => {
        const g = new mp.Generator(s);
        for (let i = 0; i < 20; i++) {
          const r = g.random();
          assert.ok(r >= 0 && r < 1);
          const k = g.randint(n);
          assert.ok(Number.isInteger(k) && k >= 0 && k < n);
          const sd = g.seed();
          assert.ok(Number.isSafeInteger(sd) && sd >= 0 && sd < 2 ** 52);
        }
      }),
    );
  });

  test('randint is close to uniform (chi-square over 10 bins)', () => {
    const g = new mp.Generator(12345);
    const bins = new Array(10).fill(0);
    const n = 100_000;
    for (let i = 0; i < n; i++) bins[g.randint(10)]++;
    const chi2 = bins.reduce((a, c) => a + (c - n / 10) ** 2 / (n / 10), 0);
    assert.ok(chi2 < 27.9, `chi-square ${chi2} (p = 0.001 at 9 degrees of freedom: 27.9)`);
  });

  test('bad seeds, randint bounds and states are coded errors', () => {
    for (const bad of [-1, 1.5, 2 ** 52, NaN, '3']) {
      throwsCoded(() => new mp.Generator(bad as number), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    }
    const g = new mp.Generator(1);
    throwsCoded(() => g.randint(0), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => g.setState([0, 0, 0, 0]), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => g.setState([1, 2, 3]), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
  });
});

describe('samplers', () => {
  test('SequentialSampler: 0…n-1, length read at each pass', () => {
    const ds = { length: 4 };
    const s = new mp.SequentialSampler(ds);
    assert.deepEqual([...s], [0, 1, 2, 3]);
    ds.length = 2;
    assert.equal(s.length, 2);
    assert.deepEqual([...s], [0, 1]);
  });

  test('RandomSampler without replacement: every index once per pass, passes differ, same seed same passes', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 300 }), seed, (n, s) => {
        const a = new mp.RandomSampler(n, { generator: new mp.Generator(s) });
        const p1 = [...a];
        assert.deepEqual(
          [...p1].sort((x, y) => x - y),
          Array.from({ length: n }, (_, i) => i),
        );
        const p2 = [...a];
        const b = new mp.RandomSampler(n, { generator: new mp.Generator(s) });
        assert.deepEqual([...b], p1);
        assert.deepEqual([...b], p2);
        if (n >= 8) assert.notDeepEqual(p1, p2);
      }),
    );
  });

  test('RandomSampler numSamples beyond the length: whole permutations, cut short; with replacement: any index', () => {
    const s = new mp.RandomSampler(5, { numSamples: 12, generator: new mp.Generator(3) });
    const xs = [...s];
    assert.equal(xs.length, 12);
    assert.deepEqual(xs.slice(0, 5).sort(), [0, 1, 2, 3, 4]);
    assert.deepEqual(xs.slice(5, 10).sort(), [0, 1, 2, 3, 4]);
    const r = new mp.RandomSampler(3, { replacement: true, numSamples: 50, generator: new mp.Generator(3) });
    const ys = [...r];
    assert.equal(ys.length, 50);
    assert.ok(ys.every((y) => y >= 0 && y < 3));
    assert.equal(r.length, 50);
    throwsCoded(() => new mp.RandomSampler(3, { numSamples: 0 }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(
      () => new mp.RandomSampler(3, { replacement: 'yes' as unknown as boolean }),
      mp.InvalidArgumentError,
      'ERR_TP_INVALID_ARGUMENT',
    );
  });

  test('SubsetRandomSampler: a permutation of the indices given', () => {
    const s = new mp.SubsetRandomSampler([10, 20, 30, 40], { generator: new mp.Generator(9) });
    assert.deepEqual([...s].sort(), [10, 20, 30, 40]);
    assert.equal(s.length, 4);
  });

  test("BatchSampler: torch's examples, and every index once in order for any n and batch size", () => {
    assert.deepEqual([...new mp.BatchSampler(new mp.SequentialSampler(10), 3, false)], [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]);
    assert.deepEqual(
      [...new mp.BatchSampler(new mp.SequentialSampler(10), 3, true)],
      [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7, 8],
      ],
    );
    fc.assert(
      fc.property(fc.nat(200), fc.integer({ min: 1, max: 50 }), fc.boolean(), (n, bs, dropLast) => {
        const b = new mp.BatchSampler(new mp.SequentialSampler(n), bs, dropLast);
        const batches = [...b];
        assert.equal(batches.length, b.length);
        const flat = batches.flat();
        const kept = dropLast ? Math.floor(n / bs) * bs : n;
        assert.deepEqual(
          flat,
          Array.from({ length: kept }, (_, i) => i),
        );
        assert.ok(batches.every((x, i) => x.length === bs || (!dropLast && i === batches.length - 1)));
      }),
    );
    throwsCoded(() => new mp.BatchSampler([1, 2], 0), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => new mp.BatchSampler(5 as unknown as number[], 2), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    assert.equal(
      new mp.BatchSampler(
        (function* () {
          yield 1;
        })(),
        2,
      ).length,
      undefined,
    );
  });
});
