// Every kind of sync object inside a message, both ways: the child works on the same shared
// memory as the parent, one object received twice is one object, and what comes back is the
// very object sent. And ownership across processes: an RLock held in another process is
// neither re-entered nor released here.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { settleBeforeLeakCheck } from './settle.js';
import { checkLeaks } from '../helpers/leaks.js';
import { throwsCoded } from '../helpers/errors.js';
import { reap } from '../helpers/procs.js';
import type { AllKinds } from './fixtures/targets.js';

settleBeforeLeakCheck();
checkLeaks();

const targets = new URL('./fixtures/targets.js', import.meta.url);
const target = (name: string) => ({ module: targets, export: name });

describe('sync objects in messages', () => {
  for (const strategy of ['file_descriptor', 'file_system'] as const) {
    test(`RLock, Semaphore, BoundedSemaphore, Condition, Barrier and Array go to a child and back (${strategy})`, async () => {
      mp.setSharingStrategy(strategy);
      try {
        const sem = new mp.Semaphore(0);
        const sent: AllKinds = {
          rlock: new mp.RLock(),
          sem,
          bsem: new mp.BoundedSemaphore(1),
          cond: new mp.Condition(),
          barrier: new mp.Barrier(2),
          arr: mp.Array('i', 2),
          again: sem,
        };
        const q = new mp.Queue();
        const back = new mp.Queue<AllKinds & { same: boolean; index: number }>();
        const ctx = mp.startProcesses(target('echoAll'), { args: [q, back], join: false });
        try {
          await q.put(sent);
          // The child's unit, released there, is taken here: one count in shared memory.
          assert.equal(await sem.acquire({ timeout: 20_000 }), true);
          assert.equal(sent.arr.get(0), 7);
          await sent.cond.acquire();
          assert.equal(await sent.cond.waitFor(() => sent.arr.get(1) === 1, 20_000), true);
          sent.cond.release();
          const mine = await sent.barrier.wait(20_000);
          const got = await back.get();
          assert.deepEqual([mine, got.index].sort(), [0, 1], 'one round of the barrier, both parties');
          assert.equal(got.same, true, 'one semaphore twice in a message arrives as one');
          for (const k of ['rlock', 'sem', 'bsem', 'cond', 'barrier', 'arr'] as const)
            assert.equal(got[k], sent[k], `${k} comes back as the very object`);
          assert.equal(got.cond.getLock(), sent.cond.getLock());
          assert.equal(await ctx.join(), true);
          assert.equal(sent.rlock.locked(), false, 'the child let go of every level of the RLock');
          assert.equal(sent.bsem.getValue(), 1);
        } finally {
          await reap(ctx);
          q.close();
          back.close();
        }
      } finally {
        mp.setSharingStrategy('file_descriptor');
      }
    });
  }
});

describe('ownership across processes', () => {
  test('an RLock held in a child is not re-entered here, and releasing it here is a NotHeldError', async () => {
    const r = new mp.RLock();
    const ready = new mp.Event();
    const ctx = mp.startProcesses(target('holdAndHang'), { args: [r, ready], join: false });
    try {
      assert.equal(await ready.wait(20_000), true);
      throwsCoded(() => r.release(), mp.NotHeldError, 'ERR_TP_NOT_HELD');
      assert.equal(r.locked(), true, 'a refused release changes nothing');
      assert.equal(r.acquireSync({ timeout: 20 }), false, 'held by another process: no re-entry');
      assert.equal(await r.acquire({ blocking: false }), false);
    } finally {
      await reap(ctx);
      ready.close();
    }
  });
});
