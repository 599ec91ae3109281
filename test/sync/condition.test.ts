// Condition: Python's semantics (wait/notify need the lock, notify(n) wakes exactly n, a
// timeout resolves false), and a producer/consumer across processes.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from 'tensorproc';
import { settleBeforeLeakCheck } from './settle.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded, throwsCoded } from '../helpers/errors.js';

settleBeforeLeakCheck();
checkLeaks();

// Children that use only their arguments: the same module serves the package and dist/src.
const targets = new URL('./fixtures/shared-targets.js', import.meta.url);
const target = (name: string) => ({ module: targets, export: name });

describe('Condition in one process', () => {
  test('wait() and notify() need the lock; bad input is coded', async () => {
    const c = new mp.Condition();
    await assert.rejects(c.wait(10), isCoded(mp.NotHeldError, 'ERR_TP_NOT_HELD'));
    throwsCoded(() => c.notify(), mp.NotHeldError, 'ERR_TP_NOT_HELD');
    throwsCoded(() => c.notifyAll(), mp.NotHeldError, 'ERR_TP_NOT_HELD');
    throwsCoded(() => new mp.Condition({} as mp.Lock), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    await c.acquire();
    throwsCoded(() => c.notify(-1), mp.InvalidCountError, 'ERR_TP_INVALID_COUNT');
    throwsCoded(() => c.notify(0.5), mp.InvalidCountError, 'ERR_TP_INVALID_COUNT');
    for (const bad of [-5, 'soon', NaN])
      await assert.rejects(c.wait(bad as number), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
    await assert.rejects(
      c.waitFor(() => false, 'soon' as never),
      isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'),
    );
    assert.equal(c.getLock().locked(), true, 'a refused wait keeps the lock');
    await assert.rejects(c.waitFor(42 as never), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
    c.release();
  });

  test('a wait that times out resolves false, holding the lock again (every level of an RLock)', async () => {
    const c = new mp.Condition();
    await c.acquire();
    await c.acquire();
    assert.equal(await c.wait(20), false);
    const lock = c.getLock();
    c.release();
    assert.equal(lock.locked(), true, 'the RLock came back at its level');
    c.release();
    assert.equal(lock.locked(), false);
  });

  // The waiters here are tasks of this one thread; each resolves holding the lock, and this
  // test releases it for them, in whichever order they finish (the other waits for it).
  const inTurn = async (c: mp.Condition, waits: Promise<boolean>[]): Promise<boolean[]> => {
    const out = new Map<Promise<boolean>, boolean>();
    while (out.size < waits.length) {
      const [w, ok] = await Promise.race(waits.filter((x) => !out.has(x)).map((x) => x.then((ok) => [x, ok] as const)));
      out.set(w, ok);
      c.release();
    }
    return waits.map((w) => out.get(w)!);
  };

  test('notify(1) wakes exactly one of two waiters, the first; notifyAll() the rest', async () => {
    const c = new mp.Condition(new mp.Lock());
    await c.acquire();
    const first = c.wait(5000);
    // `first` has let go of the lock: the second waiter can take it and wait too.
    await c.acquire();
    const second = c.wait(300);
    await c.acquire();
    c.notify(1);
    c.release();
    assert.deepEqual(await inTurn(c, [first, second]), [true, false], 'the second was not notified: it timed out');
    await c.acquire();
    const a = c.wait();
    await c.acquire();
    const b = c.wait();
    await c.acquire();
    c.notifyAll();
    c.release();
    assert.deepEqual(await inTurn(c, [a, b]), [true, true]);
  });

  test("waitFor() returns the predicate's value once it holds", async () => {
    const c = new mp.Condition();
    let ready = 0;
    await c.acquire();
    const waiting = c.waitFor(() => ready);
    await c.acquire();
    ready = 7;
    c.notify();
    c.release();
    assert.equal(await waiting, 7);
    c.release();
    await c.acquire();
    assert.equal(await c.waitFor(() => 0, 20), 0, 'timed out: the last value');
    c.release();
  });
});

describe('Condition across processes', () => {
  for (const startMethod of ['spawn', 'thread'] as const) {
    test(`producer and consumer (${startMethod} children) over a bounded buffer in an Array`, async () => {
      const cond = new mp.Condition();
      const buf = mp.Array('i', 3 + 4, { lock: false });
      const out = new mp.Queue<{ sum: number; inOrder: boolean }>();
      const n = 500;
      const consumer = mp.startProcesses(target('consume'), { args: [cond, buf, n, out], startMethod, join: false });
      const producer = mp.startProcesses(target('produce'), { args: [cond, buf, n], startMethod, join: false });
      const got = await out.get();
      assert.deepEqual(got, { sum: (n * (n + 1)) / 2, inOrder: true });
      assert.equal(await producer.join(), true);
      assert.equal(await consumer.join(), true);
      out.close();
    });
  }
});
