// JoinableQueue: taskDone() and join() in one process and across processes (a port of
// CPython's _TestQueue.test_task_done), the count kept right when puts fail, and every
// error path with its class and code.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded, throwsCoded } from '../helpers/errors.js';

checkLeaks();

const targets = new URL('./fixtures/pyq-targets.js', import.meta.url);
const target = (name: string) => ({ module: targets, export: name });

describe('JoinableQueue in one process', () => {
  test('a Queue whose join() resolves once every item put has had its taskDone()', async () => {
    const q = new mp.JoinableQueue<number>();
    assert.ok(q instanceof mp.Queue);
    assert.equal(await q.join(), true, 'nothing put: join() resolves at once');
    for (let i = 0; i < 3; i++) await q.put(i);
    assert.equal(q.unfinishedTasks, 3);
    assert.equal(await q.join({ timeout: 0 }), false);
    for (let i = 0; i < 3; i++) {
      assert.equal(await q.get(), i);
      assert.equal(await q.join({ timeout: 0 }), false, 'taken is not done');
      q.taskDone();
    }
    assert.equal(q.unfinishedTasks, 0);
    assert.equal(await q.join(), true);
    q.close();
  });

  test('taskDone() more times than items were put: TaskDoneTooManyError, and the count stays at 0', async () => {
    const q = new mp.JoinableQueue();
    throwsCoded(() => q.taskDone(), mp.TaskDoneTooManyError, 'ERR_TP_TASK_DONE_TOO_MANY');
    await q.put('x');
    await q.get();
    q.taskDone();
    const e = throwsCoded(() => q.taskDone(), mp.TaskDoneTooManyError, 'ERR_TP_TASK_DONE_TOO_MANY');
    assert.ok(e instanceof RangeError);
    assert.equal(q.unfinishedTasks, 0);
    assert.equal(await q.join({ timeout: 0 }), true);
    q.close();
  });

  test('join({ timeout }) resolves false while a task is unfinished', async () => {
    const q = new mp.JoinableQueue();
    await q.put(1);
    assert.equal(await q.join({ timeout: 20 }), false);
    await q.get();
    q.taskDone();
    assert.equal(await q.join({ timeout: 20 }), true);
    q.close();
  });

  test('a put that fails is not a task: full queue, a value that cannot travel, a closed queue', async () => {
    const q = new mp.JoinableQueue({ maxsize: 1 });
    await q.put('a');
    await assert.rejects(q.put('b', { timeout: 0 }), isCoded(mp.QueueFullError, 'ERR_TP_QUEUE_FULL'));
    await assert.rejects(q.put('c', { timeout: 5 }), isCoded(mp.QueueFullError, 'ERR_TP_QUEUE_FULL'));
    await assert.rejects(q.put((() => 1) as never), isCoded(mp.NotTransferableError, 'ERR_TP_NOT_TRANSFERABLE'));
    assert.equal(q.unfinishedTasks, 1);
    await q.get();
    q.taskDone();
    assert.equal(await q.join({ timeout: 0 }), true);
    q.close();
    await assert.rejects(q.put('d'), isCoded(mp.QueueClosedError, 'ERR_TP_QUEUE_CLOSED'));
    throwsCoded(() => q.taskDone(), mp.QueueClosedError, 'ERR_TP_QUEUE_CLOSED');
    await assert.rejects(q.join(), isCoded(mp.QueueClosedError, 'ERR_TP_QUEUE_CLOSED'));
    assert.equal(q.unfinishedTasks, 0);
  });

  test('close() ends a pending join() with QueueClosedError; bad options are coded', async () => {
    const q = new mp.JoinableQueue();
    await q.put(1);
    const pending = q.join();
    q.close();
    await assert.rejects(pending, isCoded(mp.QueueClosedError, 'ERR_TP_QUEUE_CLOSED'));
    const r = new mp.JoinableQueue();
    await assert.rejects(r.join({ timeout: -1 }), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
    await assert.rejects(r.join(5 as never), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
    throwsCoded(() => new mp.JoinableQueue({ maxsize: 1.5 }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    r.close();
  });
});

describe('JoinableQueue across processes', () => {
  test('CPython test_task_done: 4 workers; join() returns once all 10 items are done', async () => {
    const q = new mp.JoinableQueue<number | null>();
    const done = mp.Value('i', 0);
    const ctx = mp.startProcesses(target('taskWorker'), { args: [q, done], nprocs: 4, join: false });
    for (let i = 0; i < 10; i++) await q.put(i);
    assert.equal(await q.join({ timeout: 60_000 }), true);
    assert.equal(done.value, 10, 'join() returned before every item was done');
    for (let i = 0; i < 4; i++) await q.put(null);
    await ctx.join();
    q.close();
  });

  for (const startMethod of ['spawn', 'thread'] as const) {
    test(`a child's taskDone() releases the parent's pending join() (${startMethod})`, async () => {
      const q = new mp.JoinableQueue();
      const got = new mp.Event();
      const go = new mp.Event();
      const ctx = mp.startProcesses(target('doneOnSignal'), { args: [q, got, go], startMethod, join: false });
      await q.put({ work: 1 });
      assert.equal(await got.wait(30_000), true);
      assert.equal(await q.join({ timeout: 0 }), false, 'taken by the child, not done yet');
      const joined = q.join({ timeout: 60_000 });
      go.set();
      assert.equal(await joined, true);
      assert.equal(q.unfinishedTasks, 0);
      await ctx.join();
      for (const o of [q, got, go]) o.close();
    });
  }

  test('a put that waits for a slot and is rejected by close() in a child is not left as a task', async () => {
    const q = new mp.JoinableQueue<string>({ maxsize: 1 });
    const out = new mp.Queue<string>();
    const ctx = mp.startProcesses(target('putThenClose'), { args: [q, out], join: false });
    assert.equal(await out.get({ timeout: 60_000 }), 'ERR_TP_QUEUE_CLOSED');
    await ctx.join();
    assert.equal(q.unfinishedTasks, 1, 'only the put that went in counts');
    assert.equal(await q.get(), 'first');
    q.taskDone();
    assert.equal(await q.join({ timeout: 0 }), true);
    q.close();
    out.close();
  });
});
