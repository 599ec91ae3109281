// Every public method refuses arguments it does not take (src/arguments.ts), naming them, with
// ERR_TP_INVALID_ARGUMENT: JavaScript drops extra arguments silently, so `conn.recv('x')` used
// to wait for ever on an empty pipe (issue 25). A refused call does nothing: no message taken
// or sent, no state changed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';

checkLeaks();

/** Refused, naming the method and the extra value. */
function refused(method: string, shown: string): (e: unknown) => true {
  return (e: unknown) => {
    isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT')(e);
    const m = (e as Error).message;
    assert.ok(m.includes(method) && m.includes(shown), `the message names ${method} and ${shown}: ${m}`);
    return true;
  };
}

// Calls through `any`: the types forbid these calls, plain JavaScript does not.
test('Connection: recv, send, poll and close refuse extra arguments; recv("x") does not wait', async () => {
  const [a, b]: any[] = mp.Pipe();
  try {
    await assert.rejects(a.recv('x'), refused('Connection.recv()', '"x"'));
    await assert.rejects(a.send(1, 2), refused('Connection.send()', '2'));
    await assert.rejects(a.poll(0, 'y'), refused('Connection.poll()', '"y"'));
    assert.throws(() => a.close(true), refused('Connection.close()', 'true'));
    assert.equal(await b.poll(0), false, 'the refused send sent nothing');
    await a.send('kept');
    assert.equal(await b.recv(), 'kept');
  } finally {
    a.close();
    b.close();
  }
});

test('Queue: every method refuses extra arguments, and a refused get takes nothing', async () => {
  const q: any = new mp.Queue();
  try {
    await q.put('kept');
    await assert.rejects(q.put(1, {}, 3), refused('Queue.put()', '3'));
    await assert.rejects(q.putNowait(1, 2), refused('Queue.putNowait()', '2'));
    await assert.rejects(q.get({}, 'x'), refused('Queue.get()', '"x"'));
    await assert.rejects(q.getNowait(1), refused('Queue.getNowait()', '1'));
    await assert.rejects(q.joinThread(1), refused('Queue.joinThread()', '1'));
    for (const m of ['qsize', 'empty', 'full', 'cancelJoinThread', 'isClosed', 'close'])
      assert.throws(() => q[m](null), refused(`Queue.${m}()`, 'null'));
    assert.equal(q.qsize(), 1);
    assert.equal(await q.get(), 'kept');
  } finally {
    q.close();
  }
});

test('SimpleQueue: every method refuses extra arguments', async () => {
  const q: any = new mp.SimpleQueue();
  try {
    await assert.rejects(q.get(5), refused('SimpleQueue.get()', '5'));
    await assert.rejects(q.put(1, 2), refused('SimpleQueue.put()', '2'));
    assert.equal(q.empty(), true, 'the refused put sent nothing');
    for (const m of ['empty', 'isClosed', 'close']) assert.throws(() => q[m]({}), refused(`SimpleQueue.${m}()`, '[object Object]'));
  } finally {
    q.close();
  }
});

test('Event: every method refuses extra arguments', async () => {
  const ev: any = new mp.Event();
  try {
    for (const m of ['isSet', 'set', 'clear', 'close']) assert.throws(() => ev[m](1), refused(`Event.${m}()`, '1'));
    assert.equal(ev.isSet(), false, 'the refused set() did nothing');
    await assert.rejects(ev.wait(0, 1), refused('Event.wait()', '1'));
  } finally {
    ev.close();
  }
});

test('Lock: every method refuses extra arguments', async () => {
  const lock: any = new mp.Lock();
  await assert.rejects(lock.acquire({}, 1), refused('Lock.acquire()', '1'));
  await assert.rejects(lock.hold({}, 1), refused('Lock.hold()', '1'));
  assert.throws(() => lock.acquireSync({}, 1), refused('Lock.acquireSync()', '1'));
  assert.throws(() => lock.holdSync({}, 1), refused('Lock.holdSync()', '1'));
  assert.throws(() => lock.locked(1), refused('Lock.locked()', '1'));
  assert.equal(lock.locked(), false, 'nothing refused took the lock');
  assert.equal(await lock.acquire(), true);
  assert.throws(() => lock.release(1), refused('Lock.release()', '1'));
  assert.equal(lock.locked(), true, 'the refused release() left it held');
  lock.release();
});

test('Tensor: methods refuse extra arguments; copy() says what it got', () => {
  const t: any = mp.zeros([2, 3]);
  const calls: [string, unknown[]][] = [
    ['dim', [1]],
    ['numel', [1]],
    ['isContiguous', [1]],
    ['set', [[0, 0], 1, 1]],
    ['select', [0, 0, 1]],
    ['narrow', [0, 0, 1, 1]],
    ['transpose', [0, 1, 1]],
    ['contiguous', [1]],
    ['clone', [1]],
    ['fill', [1, 1]],
    ['copy', [t, 1]],
    ['toArray', [1]],
    ['shareMemory', [1]],
    ['isShared', [1]],
    ['release', [1]],
  ];
  for (const [m, args] of calls) assert.throws(() => t[m](...args), refused(`Tensor.${m}()`, '1'));
  assert.equal(t.get(0, 0), 0, 'the refused set() and fill() changed nothing');
  assert.throws(() => t.copy({}), refused('copy() takes a Tensor', '[object Object]'));
  t.release();
});
