// Semaphore and BoundedSemaphore: Python's semantics, the bound on concurrency across
// processes, and the units of a holder that died coming back.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { settleBeforeLeakCheck } from './settle.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded, throwsCoded } from '../helpers/errors.js';
import { reap } from '../helpers/procs.js';

settleBeforeLeakCheck();
checkLeaks();

const targets = new URL('./fixtures/targets.js', import.meta.url);
const target = (name: string) => ({ module: targets, export: name });

describe('Semaphore in one process', () => {
  test('counts down and up; non-blocking and timed tries', async () => {
    const s = new mp.Semaphore(2);
    assert.equal(s.getValue(), 2);
    assert.equal(await s.acquire(), true);
    assert.equal(s.acquireSync(), true);
    assert.equal(s.getValue(), 0);
    assert.equal(await s.acquire({ blocking: false }), false);
    assert.equal(await s.acquire({ timeout: 20 }), false);
    assert.equal(s.acquireSync({ timeout: 0 }), false);
    s.release();
    s.release();
    s.release(); // an unbounded semaphore may go past its start
    assert.equal(s.getValue(), 3);
    assert.equal(new mp.Semaphore().getValue(), 1);
    assert.equal(new mp.Semaphore(0).getValue(), 0);
  });

  test('a waiter gets the unit another task releases', async () => {
    const s = new mp.Semaphore(0);
    const got = s.acquire();
    await new Promise((r) => setImmediate(r));
    s.release();
    assert.equal(await got, true);
    assert.equal(s.getValue(), 0);
  });

  test('BoundedSemaphore: releasing past the bound is a coded error that changes nothing', () => {
    const b = new mp.BoundedSemaphore(2);
    throwsCoded(() => b.release(), mp.BoundExceededError, 'ERR_TP_BOUND_EXCEEDED');
    b.acquireSync();
    b.release();
    throwsCoded(() => b.release(), mp.BoundExceededError, 'ERR_TP_BOUND_EXCEEDED');
    assert.equal(b.getValue(), 2);
  });

  test('bad counts and options are coded errors', async () => {
    for (const bad of [-1, 1.5, NaN, '2', 2 ** 31]) {
      throwsCoded(() => new mp.Semaphore(bad as number), mp.InvalidCountError, 'ERR_TP_INVALID_COUNT');
      throwsCoded(() => new mp.BoundedSemaphore(bad as number), mp.InvalidCountError, 'ERR_TP_INVALID_COUNT');
    }
    const s = new mp.Semaphore(1);
    await assert.rejects(s.acquire({ timeout: NaN }), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
    assert.equal(s.getValue(), 1, 'a refused acquire takes nothing');
  });

  test('acquireSync when only this thread holds units would never end: WouldDeadlockError', async () => {
    const s = new mp.Semaphore(1);
    s.acquireSync();
    throwsCoded(() => s.acquireSync(), mp.WouldDeadlockError, 'ERR_TP_WOULD_DEADLOCK');
    assert.equal(s.acquireSync({ blocking: false }), false);
    s.release();
    // Nobody holds a unit of a signal semaphore: a blocking wait is for a release elsewhere.
    const signal = new mp.Semaphore(0);
    assert.equal(signal.acquireSync({ timeout: 10 }), false);
  });

  test('hold() / holdSync() scopes, and their timeout', async () => {
    const s = new mp.BoundedSemaphore(1);
    {
      using _h = s.holdSync();
      assert.equal(s.getValue(), 0);
      await assert.rejects(s.hold({ timeout: 10 }), isCoded(mp.LockTimeoutError, 'ERR_TP_LOCK_TIMEOUT'));
    }
    assert.equal(s.getValue(), 1);
  });
});

describe('Semaphore across processes', () => {
  for (const startMethod of ['spawn', 'thread'] as const) {
    test(`never more than n inside: 4 ${startMethod} children, Semaphore(2)`, async () => {
      const sem = new mp.Semaphore(2);
      const inside = mp.zeros([2], { dtype: 'int32', shared: true });
      await mp.startProcesses(target('inside'), { args: [sem, inside, 200], nprocs: 4, startMethod });
      assert.equal(inside.get(0), 0, 'everyone left');
      assert.ok((inside.get(1) as number) <= 2, `at most 2 inside at once, saw ${String(inside.get(1))}`);
      assert.ok((inside.get(1) as number) >= 1);
      assert.equal(sem.getValue(), 2);
      inside.release();
    });
  }

  test('a holder SIGKILLed inside: its unit comes back, with a coded warning', async () => {
    const sem = new mp.BoundedSemaphore(1);
    const ready = new mp.Event();
    const ctx = mp.startProcesses(target('holdAndHang'), { args: [sem, ready], join: false });
    try {
      assert.equal(await ready.wait(20_000), true);
      assert.equal(sem.getValue(), 0);
      const warned = new Promise<Error>((resolve) => process.once('warning', resolve));
      ctx.processes[0]!.kill('SIGKILL');
      assert.equal(await sem.acquire(), true);
      assert.equal(((await warned) as mp.OwnerDiedWarning).code, 'ERR_TP_OWNER_DIED');
      sem.release();
      assert.equal(sem.getValue(), 1, 'given back once, not past the bound');
    } finally {
      await reap(ctx);
      ready.close();
    }
  });

  test('a holder thread that ends holding a unit gives it back', async () => {
    const sem = new mp.Semaphore(1);
    const ready = new mp.Event();
    const go = new mp.Event();
    const ctx = mp.startProcesses(target('holdThenExit'), { args: [sem, ready, go], startMethod: 'thread', join: false });
    try {
      assert.equal(await ready.wait(20_000), true);
      assert.equal(await sem.acquire({ blocking: false }), false);
      go.set();
      assert.equal(await ctx.join(), true);
      assert.equal(sem.acquireSync(), true); // a blocking wait here: the holder is another thread
      assert.equal(sem.getValue(), 0);
      sem.release();
    } finally {
      await reap(ctx);
      ready.close();
      go.close();
    }
  });
});
