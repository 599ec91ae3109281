// WeightedRandomSampler and DistributedSampler as torch's: DistributedSampler's shares,
// padding and dropLast index for index against torch's (shuffle off; shuffled, the same
// structure over our own permutation), setEpoch; the weighted sampler's frequencies over a
// large seeded draw within a stated tolerance; the errors torch raises, with class and code.
import { test, describe, before } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { throwsCoded } from '../helpers/errors.js';
import { checkLeaks } from '../helpers/leaks.js';
import { NO_TORCH, torchReference } from './fixtures/torch-reference.js';

checkLeaks();

const SIZES = [0, 1, 2, 5, 10, 11, 12, 23];
const REPLICAS = [1, 2, 3, 4, 7];

const SCRIPT = `
import json
from torch.utils.data.distributed import DistributedSampler
out = []
for n in ${JSON.stringify(SIZES)}:
    for r in ${JSON.stringify(REPLICAS)}:
        for dl in [False, True]:
            ranks = [DistributedSampler(range(n), num_replicas=r, rank=k, shuffle=False, drop_last=dl) for k in range(r)]
            out.append({'n': n, 'r': r, 'dropLast': dl, 'len': len(ranks[0]), 'ranks': [list(s) for s in ranks]})
print(json.dumps(out))
`;

interface Case {
  n: number;
  r: number;
  dropLast: boolean;
  len: number;
  ranks: number[][];
}

/** The ranks' indices put back in the order they were dealt from (rank r took places r, r+R, …). */
function interleave(ranks: number[][]): number[] {
  const out: number[] = [];
  for (let i = 0; i < ranks[0]!.length; i++) for (const r of ranks) out.push(r[i]!);
  return out;
}

/** torch's rule, written out: what the tests expect where torch is absent. */
function expected(n: number, r: number, dropLast: boolean, order: number[]): number[][] {
  const num = dropLast && n % r !== 0 ? Math.floor(n / r) : Math.ceil(n / r);
  const total = num * r;
  const idx = dropLast ? order.slice(0, total) : [...order, ...Array.from({ length: total - n }, (_, k) => order[k % n]!)];
  return Array.from({ length: r }, (_, k) => idx.filter((_, i) => i % r === k));
}

describe('DistributedSampler', () => {
  let ref: Case[] | null = null;
  before(() => {
    ref = torchReference(SCRIPT) as Case[] | null;
  });

  test('unshuffled: every rank the same count, padded from the start or cut with dropLast, index for index as torch', (t) => {
    if (ref === null) t.diagnostic(`${NO_TORCH}: checked against torch's rule written out`);
    const cases =
      ref ??
      SIZES.flatMap((n) =>
        REPLICAS.flatMap((r) =>
          [false, true].map((dropLast) => {
            const ranks = expected(
              n,
              r,
              dropLast,
              Array.from({ length: n }, (_, i) => i),
            );
            return { n, r, dropLast, len: ranks[0]!.length, ranks };
          }),
        ),
      );
    assert.equal(cases.length, SIZES.length * REPLICAS.length * 2);
    for (const c of cases) {
      const ranks = Array.from(
        { length: c.r },
        (_, rank) => new mp.DistributedSampler(c.n, { numReplicas: c.r, rank, shuffle: false, dropLast: c.dropLast }),
      );
      const what = `n ${c.n}, ${c.r} replicas, dropLast ${c.dropLast}`;
      assert.deepEqual(
        ranks.map((s) => [...s]),
        c.ranks,
        what,
      );
      for (const s of ranks) assert.equal(s.length, c.len, what);
    }
  });

  test('shuffled: one permutation of seed + epoch shared by the ranks, padded or cut as unshuffled; setEpoch changes it', () => {
    for (const n of [10, 11, 23]) {
      for (const r of [3, 4]) {
        for (const dropLast of [false, true]) {
          const make = (rank: number, seed = 7) => new mp.DistributedSampler({ length: n }, { numReplicas: r, rank, seed, dropLast });
          const ranks = Array.from({ length: r }, (_, k) => [...make(k)]);
          const dealt = interleave(ranks);
          const order = dealt.slice(0, Math.min(n, dealt.length));
          if (!dropLast) {
            assert.deepEqual(
              [...order].sort((a, b) => a - b),
              Array.from({ length: n }, (_, i) => i),
            );
          }
          assert.equal(new Set(order).size, order.length, 'no index twice before the padding');
          assert.deepEqual(ranks, expected(n, r, dropLast, dropLast ? dealt : order), `n ${n}, ${r} replicas, dropLast ${dropLast}`);
          assert.deepEqual([...make(1)], ranks[1], 'the same seed and epoch, the same order');
          const s = make(1);
          s.setEpoch(1);
          assert.notDeepEqual([...s], ranks[1], 'another epoch, another order');
          assert.equal(s.epoch, 1);
          const other = make(1, 8);
          assert.notDeepEqual([...other], ranks[1], 'another seed, another order');
        }
      }
    }
    // seed + epoch is what is seeded: seed 7 epoch 1 is seed 8 epoch 0.
    const a = new mp.DistributedSampler(20, { numReplicas: 2, rank: 0, seed: 7 });
    a.setEpoch(1);
    assert.deepEqual([...a], [...new mp.DistributedSampler(20, { numReplicas: 2, rank: 0, seed: 8 })]);
  });

  test('errors as torch: rank out of range, no replicas, bad options', () => {
    const bad: unknown[] = [
      { numReplicas: 2, rank: 2 },
      { numReplicas: 2, rank: -1 },
      { numReplicas: 0, rank: 0 },
      { numReplicas: 1.5, rank: 0 },
      { numReplicas: 2, rank: 0, shuffle: 'yes' },
      { numReplicas: 2, rank: 0, seed: -3 },
      { numReplicas: 2, rank: 0, dropLast: 1 },
      undefined,
    ];
    for (const o of bad) throwsCoded(() => new mp.DistributedSampler(10, o as never), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    const e = throwsCoded(
      () => new mp.DistributedSampler(10, { numReplicas: 3, rank: 3 }),
      mp.InvalidArgumentError,
      'ERR_TP_INVALID_ARGUMENT',
    );
    assert.match(e.message, /Invalid rank 3, rank should be in the interval \[0, 2\]/);
    throwsCoded(() => new mp.DistributedSampler(-1, { numReplicas: 1, rank: 0 }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(
      () => new mp.DistributedSampler(3, { numReplicas: 1, rank: 0 }).setEpoch(-1),
      mp.InvalidArgumentError,
      'ERR_TP_INVALID_ARGUMENT',
    );
  });
});

describe('WeightedRandomSampler', () => {
  /** |count - N p| within 5 binomial standard deviations: a seeded draw, so the test is deterministic; 5 sd would fail a correct sampler about once in 3.5 million. */
  function assertFrequencies(counts: number[], probs: number[], draws: number, what: string): void {
    probs.forEach((p, i) => {
      const sd = Math.sqrt(draws * p * (1 - p));
      const dev = Math.abs(counts[i]! - draws * p);
      assert.ok(dev <= 5 * sd + 1e-9, `${what}: index ${i} drawn ${counts[i]} times, expected ${draws * p} ± ${5 * sd}`);
    });
  }

  test('with replacement: 200,000 draws, each index as often as its weight says (5 sd); zero weight never', () => {
    const weights = [1, 2, 3, 4, 0, 10];
    const total = weights.reduce((a, b) => a + b, 0);
    const N = 200_000;
    const s = new mp.WeightedRandomSampler(weights, N, { seed: 7 });
    assert.equal(s.length, N);
    const counts = new Array<number>(weights.length).fill(0);
    for (const i of s) counts[i]!++;
    assert.equal(counts[4], 0);
    assertFrequencies(
      counts,
      weights.map((w) => w / total),
      N,
      'with replacement',
    );
    assert.deepEqual(
      [...new mp.WeightedRandomSampler(weights, 50, { seed: 7 })],
      [...new mp.WeightedRandomSampler(weights, 50, { seed: 7 })],
    );
    const t = mp.tensor([1, 2, 3, 4], { dtype: 'float64' });
    assert.deepEqual(
      [...new mp.WeightedRandomSampler(t, 50, { seed: 3 })],
      [...new mp.WeightedRandomSampler([1, 2, 3, 4], 50, { seed: 3 })],
    );
  });

  test("without replacement: distinct indices; the first and second draws' frequencies as sequential weighted draws (5 sd)", () => {
    const w = [1, 2, 3, 4];
    const p = w.map((x) => x / 10);
    const passes = 20_000;
    const s = new mp.WeightedRandomSampler(w, 3, { replacement: false, seed: 11 });
    const first = [0, 0, 0, 0];
    const second = [0, 0, 0, 0];
    for (let k = 0; k < passes; k++) {
      const got = [...s];
      assert.equal(new Set(got).size, 3);
      first[got[0]!]!++;
      second[got[1]!]!++;
    }
    // P(second = j) = sum over i != j of p_i p_j / (1 - p_i): torch.multinomial's law without replacement.
    const p2 = p.map((pj, j) => p.reduce((acc, pi, i) => (i === j ? acc : acc + (pi * pj) / (1 - pi)), 0));
    assertFrequencies(first, p, passes, 'first draw');
    assertFrequencies(second, p2, passes, 'second draw');
    const all = [...new mp.WeightedRandomSampler([0, 5, 0, 1], 2, { replacement: false, seed: 1 })].sort();
    assert.deepEqual(all, [1, 3], 'zero weights are never drawn');
  });

  test('errors: bad weights, numSamples, replacement, too many draws without replacement', () => {
    const bad: [unknown, unknown, unknown][] = [
      [[1, -1], 2, {}],
      [[0, 0], 2, {}],
      [[], 2, {}],
      [[1, Number.NaN], 2, {}],
      [mp.zeros([2, 2]), 2, {}],
      [5, 2, {}],
      [[1, 2], 0, {}],
      [[1, 2], 1.5, {}],
      [[1, 2], 2, { replacement: 'no' }],
      [[1, 0, 2], 3, { replacement: false }],
      [[1, 2], 2, { seed: 1, generator: new mp.Generator(1) }],
    ];
    for (const [w, n, o] of bad) {
      throwsCoded(
        () => new mp.WeightedRandomSampler(w as never, n as never, o as never),
        mp.InvalidArgumentError,
        'ERR_TP_INVALID_ARGUMENT',
      );
    }
  });
});
