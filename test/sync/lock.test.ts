// Lock and RLock: Python's semantics in one process, mutual exclusion across processes and
// threads (a shared counter ends exact), travel in spawn arguments and in messages, and a
// holder killed inside the lock (process and thread): the next acquirer gets it and is told.
import { test, describe, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { settleBeforeLeakCheck } from './settle.js';
import { checkLeaks, namesHeldBy } from '../helpers/leaks.js';
import { waitFor } from '../helpers/wait.js';
import { isCoded, throwsCoded } from '../helpers/errors.js';
import { reap } from '../helpers/procs.js';

settleBeforeLeakCheck();
checkLeaks();

const targets = new URL('./fixtures/targets.js', import.meta.url);
const target = (name: string) => ({ module: targets, export: name });

afterEach(() => mp.setSharingStrategy('file_descriptor'));

/** The next OwnerDiedWarning this process emits. */
function nextOwnerDied(): Promise<mp.OwnerDiedWarning> {
  return new Promise((resolve) => {
    const on = (w: Error) => {
      if (w instanceof mp.OwnerDiedWarning) {
        process.off('warning', on);
        resolve(w);
      }
    };
    process.on('warning', on);
  });
}

describe('Lock and RLock in one process', () => {
  test('acquire, release, locked, non-blocking and timed tries', async () => {
    const l = new mp.Lock();
    assert.equal(l.locked(), false);
    assert.equal(await l.acquire(), true);
    assert.equal(l.locked(), true);
    assert.equal(await l.acquire({ blocking: false }), false);
    assert.equal(l.acquireSync({ timeout: 0 }), false);
    assert.equal(await l.acquire({ timeout: 20 }), false);
    l.release();
    assert.equal(l.locked(), false);
    assert.equal(l.acquireSync({ timeout: 20 }), true);
    l.release();
  });

  test('bad input and misuse are coded errors', async () => {
    const l = new mp.Lock();
    throwsCoded(() => l.release(), mp.NotHeldError, 'ERR_TP_NOT_HELD');
    await assert.rejects(l.acquire({ timeout: -1 }), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
    await assert.rejects(l.acquire({ timeout: 'soon' as never }), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
    throwsCoded(() => l.acquireSync({ blocking: 1 as never }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => l.acquireSync(5 as never), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    assert.equal(l.locked(), false, 'a refused acquire takes nothing');
    // A Lock this thread holds: blocking here would wait for ever.
    l.acquireSync();
    throwsCoded(() => l.acquireSync(), mp.WouldDeadlockError, 'ERR_TP_WOULD_DEADLOCK');
    throwsCoded(() => l.acquireSync({ timeout: 1000 }), mp.WouldDeadlockError, 'ERR_TP_WOULD_DEADLOCK');
    await assert.rejects(l.hold({ timeout: 10 }), isCoded(mp.LockTimeoutError, 'ERR_TP_LOCK_TIMEOUT'));
    throwsCoded(() => l.holdSync({ timeout: 0 }), mp.LockTimeoutError, 'ERR_TP_LOCK_TIMEOUT');
    l.release();
  });

  test('an async acquire waits for another task of the same thread, without blocking the loop', async () => {
    const l = new mp.Lock();
    await l.acquire();
    let ticks = 0;
    const waiting = l.acquire().then((ok) => ({ ok, ticks }));
    // The event loop turns while the acquire waits: these immediates run before it resolves.
    for (let k = 0; k < 5; k++) await new Promise((r) => setImmediate(r)).then(() => ticks++);
    l.release();
    const got = await waiting;
    assert.equal(got.ok, true);
    assert.ok(got.ticks >= 5);
    l.release();
  });

  test('hold() and holdSync() release at the end of a using scope', async () => {
    const l = new mp.Lock();
    {
      using held = l.holdSync();
      assert.equal(held.ownerDied, false);
      assert.equal(l.locked(), true);
    }
    assert.equal(l.locked(), false);
    {
      await using _held = await l.hold();
      assert.equal(l.locked(), true);
    }
    assert.equal(l.locked(), false);
    const h = await l.hold();
    h.release();
    h.release(); // once only
    assert.equal(l.locked(), false);
  });

  test('RLock: re-entry by its thread, released as many times, and by it alone', async () => {
    const r = new mp.RLock();
    assert.equal(r.acquireSync(), true);
    assert.equal(await r.acquire(), true);
    assert.equal(r.acquireSync({ blocking: false }), true);
    r.release();
    r.release();
    assert.equal(r.locked(), true);
    r.release();
    assert.equal(r.locked(), false);
    throwsCoded(() => r.release(), mp.NotHeldError, 'ERR_TP_NOT_HELD');
    {
      using _a = r.holdSync();
      using _b = r.holdSync();
      assert.equal(r.locked(), true);
    }
    assert.equal(r.locked(), false);
  });
});

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  for (const startMethod of ['spawn', 'thread'] as const) {
    describe(`${strategy}, ${startMethod}`, () => {
      test('a counter incremented 100,000 times by 4 children under a Lock ends exact', async () => {
        mp.setSharingStrategy(strategy);
        const lock = new mp.Lock();
        const counter = mp.Value('i', 0, { lock: false });
        await mp.startProcesses(target('count'), { args: [lock, counter, 25_000], nprocs: 4, startMethod });
        assert.equal(counter.value, 100_000);
        assert.equal(lock.locked(), false);
      });

      test('Value with its own RLock: `using _ = await v.getLock().hold(); v.value += 1` by 4 children ends exact', async () => {
        mp.setSharingStrategy(strategy);
        const v = mp.Value('i', 0);
        await mp.startProcesses(target('countValue'), { args: [v, 5_000], nprocs: 4, startMethod });
        assert.equal(v.value, 20_000);
      });

      // A process child is SIGKILLed holding the lock; a thread child ends holding it (a killed
      // thread cleans up nothing, and its descriptors would stay open in this process).
      const how = startMethod === 'spawn' ? 'SIGKILLed' : 'ended';
      test(`a holder ${how} inside the lock: the next acquirer gets it and is told`, async () => {
        mp.setSharingStrategy(strategy);
        for (const lock of [new mp.Lock(), new mp.RLock()]) {
          const ready = new mp.Event();
          const go = new mp.Event();
          const ctx =
            startMethod === 'spawn'
              ? mp.startProcesses(target('holdAndHang'), { args: [lock, ready], join: false })
              : mp.startProcesses(target('holdThenExit'), { args: [lock, ready, go], startMethod, join: false });
          try {
            assert.equal(await ready.wait(20_000), true);
            assert.equal(lock.locked(), true);
            assert.equal(await lock.acquire({ blocking: false }), false, 'held by a live child');
            const warned = nextOwnerDied();
            if (startMethod === 'spawn') ctx.processes[0]!.kill('SIGKILL');
            else go.set();
            assert.equal(await lock.acquire(), true);
            assert.equal(lock.ownerDied, true);
            const w = await warned;
            assert.equal(w.code, 'ERR_TP_OWNER_DIED');
            lock.release();
            // The next acquire is an ordinary one.
            assert.equal(await lock.acquire(), true);
            assert.equal(lock.ownerDied, false);
            lock.release();
          } finally {
            await reap(ctx);
            ready.close();
            go.close();
          }
          // The manager takes back what a killed child held, a few ms after its death: the
          // suite's leak check must not race it.
          if (strategy === 'file_system' && startMethod === 'spawn') await waitFor(() => namesHeldBy(ctx.pids()[0]!).length === 0);
        }
      });
    });
  }
}

describe('locks in messages and arguments', () => {
  test('a lock travels inside a queue message and back, one object per process', async () => {
    const lock = new mp.Lock();
    const v = mp.Value('d', 1.5);
    const q = new mp.Queue();
    const back = new mp.Queue<{ lock: mp.Lock; again: mp.Lock; v: mp.SharedValue; same: boolean }>();
    const ctx = mp.startProcesses(target('echo'), { args: [q, back], join: false });
    try {
      await q.put({ lock, again: lock, v });
      const got = await back.get();
      assert.equal(got.same, true, 'one lock twice in a message arrives as one');
      assert.equal(got.lock, lock, 'a lock that comes back is the very same object');
      assert.equal(got.v, v);
      assert.equal(v.value, 42);
      assert.equal(await ctx.join(), true);
    } finally {
      await reap(ctx);
      q.close();
      back.close();
    }
  });

  test('acquireSync waits for a holder in another process, and takes over from it once killed (a zombie)', async () => {
    const lock = new mp.Lock();
    const ready = new mp.Event();
    const ctx = mp.startProcesses(target('holdAndHang'), { args: [lock, ready], join: false });
    try {
      assert.equal(await ready.wait(20_000), true);
      assert.equal(lock.acquireSync({ timeout: 30 }), false);
      ctx.processes[0]!.kill('SIGKILL');
      // Blocked here, this process cannot reap the child: the holder is a zombie, which is dead.
      assert.equal(lock.acquireSync(), true);
      assert.equal(lock.ownerDied, true);
      lock.release();
    } finally {
      await reap(ctx);
      ready.close();
    }
  });
});
