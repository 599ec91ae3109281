// mp.Manager (Python's SyncManager): an exact counter under a manager Lock across 4
// processes, dict/list/namespace/queue/value operations, tensors held shared, proxies in spawn
// arguments, and a killed manager: pending and later calls reject with ERR_TP_MANAGER_GONE.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';

checkLeaks();
const fixtures = new URL('./fixtures/counter.js', import.meta.url);

test('proxies across 4 processes keep an exact counter under a manager Lock; a tensor in a dict is shared', async () => {
  const m = await mp.Manager();
  try {
    const lock = await m.Lock();
    const counter = await m.Value('i', 0);
    const log = await m.list<number>();
    await mp.spawn({ module: fixtures, export: 'count' }, { args: [lock, counter, 25, log], nprocs: 4 });
    assert.equal(await counter.get(), 100);
    assert.equal(new Set(await log.copy()).size, 4, 'four processes counted');
    assert.equal(await lock.locked(), false);
    // A tensor in a manager's dict travels as a handle: a write in another process is ours too.
    const t = mp.zeros([2], { shared: true });
    const d = await m.dict<string, mp.Tensor>();
    await d.set('t', t);
    const q = await m.Queue<string>();
    await mp.spawn({ module: fixtures, export: 'touch' }, { args: [d, q] });
    assert.equal(await q.get({ timeout: 10_000 }), 'written');
    assert.equal(t.get(0), 99);
    await d.clear();
    t.release();
  } finally {
    await m.shutdown();
  }
});

test('dict, list, namespace, queue, lock and value operations, and their coded errors', async () => {
  const m = await mp.Manager();
  try {
    const d = await m.dict<string, unknown>({ a: 1 });
    await d.set('b', { nested: [1, 2] });
    assert.equal(await d.get('a'), 1);
    assert.equal(await d.get('zz', 'dflt'), 'dflt');
    assert.deepEqual(await d.keys(), ['a', 'b']);
    assert.deepEqual(await d.items(), [
      ['a', 1],
      ['b', { nested: [1, 2] }],
    ]);
    assert.equal(await d.pop('a'), 1);
    assert.equal(await d.setDefault('c', 3), 3);
    await d.update({ e: 5 });
    assert.equal(await d.len(), 3);
    assert.equal(await d.has('b'), true);
    assert.deepEqual(
      await d.copy(),
      new Map<string, unknown>([
        ['b', { nested: [1, 2] }],
        ['c', 3],
        ['e', 5],
      ]),
    );

    const l = await m.list([1, 2, 3]);
    await l.append(4);
    await l.extend([5]);
    await l.insert(0, 0);
    assert.equal(await l.get(-1), 5);
    await l.set(1, 10);
    assert.equal(await l.pop(), 5);
    assert.deepEqual(await l.slice(1, 3), [10, 2]);
    assert.equal(await l.index(3), 3);
    assert.deepEqual(await l.copy(), [0, 10, 2, 3, 4]);
    await assert.rejects(l.get(10), isCoded(mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE'));

    const ns = await m.namespace({ x: 1 });
    await ns.set('y', 'two');
    assert.equal(await ns.get('x'), 1);
    assert.deepEqual(await ns.toObject(), { x: 1, y: 'two' });

    const q = await m.Queue<number>();
    await assert.rejects(q.get({ block: false }), isCoded(mp.QueueEmptyError, 'ERR_TP_QUEUE_EMPTY'));
    await assert.rejects(q.get({ timeout: 1 }), isCoded(mp.QueueEmptyError, 'ERR_TP_QUEUE_EMPTY'));
    const waiting = q.get();
    await q.put(7);
    assert.equal(await waiting, 7);
    assert.equal(await q.empty(), true);

    const lock = await m.Lock();
    assert.equal(await lock.acquire(), true);
    assert.equal(await lock.acquire({ blocking: false }), false);
    assert.equal(await lock.acquire({ timeout: 1 }), false);
    await lock.release();
    await assert.rejects(lock.release(), isCoded(mp.NotHeldError, 'ERR_TP_NOT_HELD'));

    const v = await m.Value(41);
    await v.set((await v.get()) + 1);
    assert.equal(await v.get(), 42);
    await assert.rejects(
      (d as unknown as { call(m: string): Promise<unknown> }).call('nope'),
      isCoded(mp.ManagerCallError, 'ERR_TP_MANAGER_CALL'),
    );
  } finally {
    await m.shutdown();
  }
  await assert.rejects(m.dict(), isCoded(mp.ManagerGoneError, 'ERR_TP_MANAGER_GONE'));
});

test('a killed manager: a pending call and every later one reject with ERR_TP_MANAGER_GONE', async () => {
  const m = await mp.Manager();
  const q = await m.Queue();
  const d = await m.dict();
  const pending = q.get(); // waits in the server
  await d.set('k', 1); // the server has our pipe: the get above is in its hands
  process.kill(m.pid, 'SIGKILL');
  await assert.rejects(pending, isCoded(mp.ManagerGoneError, 'ERR_TP_MANAGER_GONE'));
  await assert.rejects(d.get('k'), isCoded(mp.ManagerGoneError, 'ERR_TP_MANAGER_GONE'));
  await m.shutdown(); // reaps it
});

test('a named manager is reached by mp.attach(name) alone; the name is unique and goes with shutdown()', async () => {
  const name = `tp-mgr-${process.pid}`;
  const m = await new mp.Manager({ name });
  try {
    await assert.rejects(mp.Manager({ name }), isCoded(mp.NameTakenError, 'ERR_TP_NAME_TAKEN'));
    const child = new mp.Process({ target: { module: fixtures, export: 'byName' }, args: [0, name] });
    child.start();
    await child.join();
    assert.equal(child.exitCode, 0);
    const attached = await mp.attach<mp.SyncManager>(name);
    assert.equal(attached.pid, m.pid);
  } finally {
    await m.shutdown();
  }
  await assert.rejects(mp.attach(name, { timeout: 0 }), isCoded(mp.NameNotFoundError, 'ERR_TP_NAME_NOT_FOUND'));
});
