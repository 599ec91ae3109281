// mp.wait(): Python's multiprocessing.connection.wait over pipe ends, queues and events.
// Already-ready objects, timeouts, children writing at moments set by events (CPython's
// TestWait.test_wait), ends whose writers are gone, closed objects and bad arguments.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { addon } from '../../src/native/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';
import { waitFor } from '../helpers/wait.js';

checkLeaks();

const targets = new URL('./fixtures/pyq-targets.js', import.meta.url);
const target = (name: string) => ({ module: targets, export: name });
const invalid = isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
const closedCode = isCoded(mp.QueueClosedError, 'ERR_TP_QUEUE_CLOSED');

describe('mp.wait in one process', () => {
  test('returns the objects ready now, in the order given, and takes nothing', async () => {
    const [a, b] = mp.Pipe<string>();
    const q = new mp.Queue<string>();
    const sq = new mp.SimpleQueue<string>();
    const idle = new mp.Queue<string>();
    const ev = new mp.Event();
    const unset = new mp.Event();
    await a.send('to b');
    await q.put('on q');
    await sq.put('on sq');
    ev.set();
    const all = [idle, unset, b, q, sq, ev];
    assert.deepEqual(await mp.wait(all), [b, q, sq, ev]);
    assert.deepEqual(await mp.wait(all, { timeout: 0 }), [b, q, sq, ev], 'again: nothing was taken');
    assert.equal(await b.recv(), 'to b');
    assert.equal(await q.get(), 'on q');
    assert.equal(await sq.get(), 'on sq');
    ev.clear();
    assert.deepEqual(await mp.wait(all, { timeout: 0 }), []);
    for (const o of [a, b, q, sq, idle, ev, unset]) o.close();
  });

  test('resolves [] after the timeout when nothing is ready, and leaves no wait behind', async () => {
    const [a, b] = mp.Pipe();
    const q = new mp.JoinableQueue();
    const ev = new mp.Event();
    assert.deepEqual(await mp.wait([b, q, ev], { timeout: 0 }), []);
    assert.deepEqual(await mp.wait([b, q, ev], { timeout: 30 }), []);
    assert.deepEqual(await mp.wait([], { timeout: 5 }), []);
    // The event's futex thread was woken when the wait ended, not left to its slice's end.
    await waitFor(() => addon.futexWaitThreads() === 0);
    for (const o of [a, b, q, ev]) o.close();
  });

  test('an event set, or set and cleared again, during the wait counts as ready', async () => {
    const ev = new mp.Event();
    const q = new mp.Queue();
    const w1 = mp.wait([q, ev]);
    setImmediate(() => ev.set());
    assert.deepEqual(await w1, [ev]);
    ev.clear();
    const w2 = mp.wait([q, ev], { timeout: 60_000 });
    setImmediate(() => {
      ev.set();
      ev.clear();
    });
    assert.deepEqual(await w2, [ev], 'a pulse is seen as Event.wait() sees it');
    // A message arriving while a wait waits.
    const w3 = mp.wait([ev, q], { timeout: 60_000 });
    setImmediate(() => void q.put('late'));
    assert.deepEqual(await w3, [q]);
    assert.equal(await q.get(), 'late');
    await waitFor(() => addon.futexWaitThreads() === 0);
    ev.close();
    q.close();
  });

  test('several waits on one object all resolve', async () => {
    const [a, b] = mp.Pipe();
    const waits = [mp.wait([b]), mp.wait([b], { timeout: 60_000 }), b.poll(60_000)];
    await a.send(1);
    const [r1, r2, polled] = await Promise.all(waits);
    assert.deepEqual(r1, [b]);
    assert.deepEqual(r2, [b]);
    assert.equal(polled, true);
    assert.equal(await b.recv(), 1);
    a.close();
    b.close();
  });

  test('closed objects: QueueClosedError, before or during the wait', async () => {
    const q = new mp.Queue();
    const ev = new mp.Event();
    const [a, b] = mp.Pipe();
    q.close();
    await assert.rejects(mp.wait([b, q]), closedCode);
    const ev2 = new mp.Event();
    ev2.close();
    await assert.rejects(mp.wait([ev2]), closedCode);
    const during = mp.wait([b, ev]);
    setImmediate(() => b.close());
    await assert.rejects(during, closedCode);
    const [c, d] = mp.Pipe();
    const duringEvent = mp.wait([d, ev]);
    setImmediate(() => ev.close());
    await assert.rejects(duringEvent, closedCode);
    for (const o of [a, c, d]) o.close();
  });

  test('bad arguments are ERR_TP_INVALID_ARGUMENT', async () => {
    const [rx, tx] = mp.Pipe(false);
    const lock = new mp.Lock();
    await assert.rejects(mp.wait(5 as never), invalid);
    await assert.rejects(mp.wait(null as never), invalid);
    await assert.rejects(mp.wait([{}] as never), invalid);
    await assert.rejects(mp.wait([rx, lock] as never), invalid);
    await assert.rejects(mp.wait([rx, 3] as never), invalid);
    await assert.rejects(mp.wait([tx]), invalid, 'the sending end of a one-way pipe');
    await assert.rejects(mp.wait([rx], { timeout: -1 }), invalid);
    await assert.rejects(mp.wait([rx], 10 as never), invalid);
    await assert.rejects(mp.wait([]), invalid, 'nothing to wait for and no timeout');
    rx.close();
    tx.close();
  });
});

describe('mp.wait with children', () => {
  test('children write at moments the parent sets: each wait returns exactly what was written', async () => {
    const [here, there] = mp.Pipe<string>();
    const q = new mp.Queue<string>();
    const sq = new mp.SimpleQueue<string>();
    const ev = new mp.Event();
    const jq = new mp.JoinableQueue<string>();
    const objects = [there, q, sq, ev, jq];
    const watched = [here, q, sq, ev, jq] as const;
    const go = objects.map(() => new mp.Event());
    const wrote = new mp.Queue<number>();
    const ctx = mp.startProcesses(target('writeOnSignal'), { args: [objects, go, wrote], join: false });
    assert.deepEqual(await mp.wait([...watched], { timeout: 0 }), []);
    for (let k = 0; k < watched.length; k++) {
      go[k]!.set();
      const ready = await mp.wait([...watched], { timeout: 60_000 });
      assert.deepEqual(ready, [watched[k]], `round ${k}`);
      assert.equal(await wrote.get({ timeout: 60_000 }), k);
      const o = watched[k]!;
      if (o instanceof mp.Connection) assert.equal(await o.recv(), `message ${k}`);
      else if (o instanceof mp.Event) o.clear();
      else assert.equal(await o.get(), `message ${k}`);
      if (o === jq) jq.taskDone();
    }
    await ctx.join();
    for (const o of [...objects, here, ...go, wrote]) o.close();
  });

  test('CPython test_wait: read from every end until its writer is gone; a gone writer is ready', async () => {
    const ends: mp.Connection<[number, number]>[] = [];
    const far: mp.Connection<[number, number]>[] = [];
    for (let i = 0; i < 3; i++) {
      const [r, w] = mp.Pipe<[number, number]>(false);
      ends.push(r);
      far.push(w);
    }
    const ctxs = far.map((w) => mp.startProcesses(target('sendAndLeave'), { args: [w, 4], join: false, nprocs: 1 }));
    for (const w of far) w.close(); // the children hold the only writing ends now
    void ctxs;
    const got: [number, number][] = [];
    let open = [...ends];
    while (open.length > 0) {
      for (const r of await mp.wait(open, { timeout: 60_000 })) {
        try {
          got.push(await r.recv());
        } catch (e) {
          isCoded(mp.PipeClosedError, 'ERR_TP_PIPE_CLOSED')(e);
          open = open.filter((x) => x !== r);
        }
      }
    }
    assert.equal(got.length, 12);
    for (const ctx of ctxs) await ctx.join();
    for (const r of ends) r.close();
  });
});
