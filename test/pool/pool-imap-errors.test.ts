// A task that throws inside imap / imapUnordered, met in every way a consumer can leave the
// loop (issue 24, bug 1): the iteration rejects with the task's error (the worker's stack in
// it), the library never throws on its own, and the pool goes on serving calls. The crash it
// guards against was a race between a failed chunk and waiting next() calls, so each way
// is repeated many times, under both start methods.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { checkLeaks } from '../helpers/leaks.js';
import { openPool, stopPoolsAfter, task } from './pools.js';
import type { Pool, StartMethod } from 'tensorproc';

stopPoolsAfter();
checkLeaks();

const TIMEOUT = { timeout: 240_000 };
const ROUNDS = 100;
const items = Array.from({ length: 10 }, (_, i) => i);

/** The task's own error, rebuilt from the worker's: its class, code and the worker's stack. */
function isTaskError(e: unknown): boolean {
  return e instanceof RangeError && (e as { code?: string }).code === 'E_THREE' && /failAt/.test(e.stack ?? '');
}

type Exit = (it: AsyncIterableIterator<unknown>) => Promise<unknown[]>;

/** The ways out of a loop over a failing imap; each returns what it met. */
const exits: Record<string, Exit> = {
  'for await to the error': async (it) => {
    const seen: unknown[] = [];
    try {
      for await (const v of it) seen.push(v);
    } catch (e) {
      seen.push(e);
    }
    return seen;
  },
  'many next() calls at once': async (it) => {
    const all = await Promise.allSettled(Array.from({ length: 14 }, () => it.next()));
    return all.map((r) => (r.status === 'rejected' ? r.reason : (r.value as IteratorResult<unknown>).value));
  },
  'one next(), then return()': async (it) => {
    const first = await it.next().then(
      (r) => r.value,
      (e: unknown) => e,
    );
    await it.return!();
    return [first];
  },
  'next() calls left unawaited, then break': async (it) => {
    const pending = [it.next(), it.next(), it.next()];
    for (const p of pending) p.catch(() => {});
    await it.return!();
    return [];
  },
};

async function roundsOf(pool: Pool, ordered: boolean, exit: Exit): Promise<void> {
  for (let round = 0; round < ROUNDS; round++) {
    const it = ordered ? pool.imap(task('failAt'), items) : pool.imapUnordered(task('failAt'), items);
    const seen = await exit(it);
    const errors = seen.filter((v) => v instanceof Error);
    assert.ok(errors.length <= 1, `the error is met at most once (round ${round})`);
    for (const e of errors) assert.ok(isTaskError(e), `the task's own error (round ${round}): ${String(e)}`);
    if (ordered && errors.length === 1) {
      // imap: every result before the failed item, in order, then its error.
      assert.deepEqual(seen.slice(0, seen.indexOf(errors[0])).slice(0, 3), [0, 1, 2]);
    }
    // Whatever the consumer did, the iteration is over once the error is met or it left.
    if (errors.length === 1 || seen.length <= 1) assert.deepEqual(await it.next(), { value: undefined, done: true });
  }
}

for (const startMethod of ['spawn', 'thread'] as StartMethod[]) {
  describe(`a failing task in imap, startMethod '${startMethod}'`, () => {
    for (const [name, exit] of Object.entries(exits)) {
      it(`${name}: ${ROUNDS} rounds each of imap and imapUnordered, then the pool still serves`, TIMEOUT, async () => {
        const pool = openPool({ processes: 2, startMethod });
        await roundsOf(pool, true, exit);
        await roundsOf(pool, false, exit);
        assert.deepEqual(
          await pool.map(task('square'), items),
          items.map((x) => x * x),
        );
        const results: unknown[] = [];
        for await (const v of pool.imap(task('square'), items)) results.push(v);
        assert.deepEqual(
          results,
          items.map((x) => x * x),
        );
      });
    }
  });
}
