// The queue layer's API in one process and with children: timeouts, close, backpressure,
// SimpleQueue, Pipe, Event, objects inside messages and in spawn arguments; every error path
// checked for class and code.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { checkLeaks, collectGarbage, openFds } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';
import { waitFor } from '../helpers/wait.js';
import { reap } from '../helpers/procs.js';
import { segmentOf } from '../helpers/segments.js';

checkLeaks();

const targets = new URL('./fixtures/targets.js', import.meta.url);
const target = (name: string) => ({ module: targets, export: name });
const code = (c: string, C: abstract new (...a: any[]) => Error) => isCoded(C, c);

/** Every message waiting on `q` now: gets with timeout 0 until the queue is empty (and not failed). */
async function drain<T>(q: mp.Queue<T>): Promise<T[]> {
  const got: T[] = [];
  for (;;) {
    try {
      got.push(await q.get({ timeout: 0 }));
    } catch (e) {
      isCoded(mp.QueueEmptyError, 'ERR_TP_QUEUE_EMPTY')(e);
      return got;
    }
  }
}

describe('Queue', () => {
  test('put then get in one process; order kept; qsize and empty', async () => {
    const q = new mp.Queue<number>();
    assert.equal(q.empty(), true);
    for (let i = 0; i < 1000; i++) await q.put(i);
    assert.equal(q.qsize(), 1000);
    assert.equal(q.empty(), false);
    for (let i = 0; i < 1000; i++) assert.equal(await q.get(), i);
    assert.equal(q.qsize(), 0);
    q.close();
  });

  test('a put beyond what the socket holds is kept and delivered in order', async () => {
    const q = new mp.Queue<Uint8Array>();
    const n = 400;
    for (let i = 0; i < n; i++) await q.put(new Uint8Array(32 * 1024).fill(i & 255));
    for (let i = 0; i < n; i++) assert.equal((await q.get())[5], i & 255);
    q.close();
  });

  test('get timeout: QueueEmptyError; getNowait likewise', async () => {
    const q = new mp.Queue();
    await assert.rejects(q.get({ timeout: 20 }), code('ERR_TP_QUEUE_EMPTY', mp.QueueEmptyError));
    await assert.rejects(q.getNowait(), code('ERR_TP_QUEUE_EMPTY', mp.QueueEmptyError));
    q.close();
  });

  test('maxsize: a put waits for a slot, and times out with QueueFullError', async () => {
    const q = new mp.Queue<number>({ maxsize: 2 });
    assert.equal(q.maxsize, 2);
    await q.put(1);
    await q.put(2);
    assert.equal(q.full(), true);
    await assert.rejects(q.put(3, { timeout: 20 }), code('ERR_TP_QUEUE_FULL', mp.QueueFullError));
    await assert.rejects(q.putNowait(3), code('ERR_TP_QUEUE_FULL', mp.QueueFullError));
    let done = false;
    const pending = q.put(3).then(() => (done = true));
    await new Promise((r) => setImmediate(r)); // a turn of the loop: a put with a free slot would have settled
    assert.equal(done, false, 'the put waits while the queue is full');
    assert.equal(q.qsize(), 2);
    assert.equal(await q.get(), 1);
    await pending;
    assert.equal(await q.get(), 2);
    assert.equal(await q.get(), 3);
    assert.equal(q.qsize(), 0);
    q.close();
  });

  test('a tensor put on a full queue is not leaked when the put times out', async () => {
    const q = new mp.Queue<mp.Tensor>({ maxsize: 1 });
    const t = mp.full([4], 1, { shared: true });
    const seg = segmentOf(t);
    await q.put(t);
    const refs = seg.refcount();
    await assert.rejects(q.put(t, { timeout: 10 }), code('ERR_TP_QUEUE_FULL', mp.QueueFullError));
    assert.equal(seg.refcount(), refs);
    (await q.get()).release();
    q.close();
  });

  test('a put that must wait for a slot is refused at once when its value cannot travel, taking nothing', async () => {
    const q = new mp.Queue<unknown>({ maxsize: 1 });
    await q.put('fills the queue');
    const released = mp.full([4], 1, { shared: true });
    released.release();
    const kept = mp.full([4], 1, { shared: true });
    const seg = segmentOf(kept);
    const refs = seg.refcount();
    // Above PACK_BYTES: a segment, and a descriptor, each (NOTE [Packed small storages]).
    const many = Array.from({ length: 300 }, () => mp.zeros([256], { shared: true }));
    const cases: [string, unknown, string, abstract new (...a: any[]) => Error][] = [
      ['a released tensor', released, 'ERR_TP_RELEASED', mp.ReleasedError],
      ['a released tensor inside a container', [kept, released], 'ERR_TP_RELEASED', mp.ReleasedError],
      ['what V8 will not serialize', { kept, b: new Blob([]) }, 'ERR_TP_NOT_TRANSFERABLE', mp.NotTransferableError],
      ['more descriptors than a message carries', many, 'ERR_TP_TOO_MANY_DESCRIPTORS', mp.TooManyDescriptorsError],
    ];
    for (const [what, value, c, C] of cases) {
      // Without the check each would wait out its timeout and fail with QueueFullError.
      await assert.rejects(q.put(value, { timeout: 30_000 }), code(c, C), what);
      await assert.rejects(q.putNowait(value), code(c, C), what);
    }
    assert.equal(seg.refcount(), refs, 'no reference taken');
    assert.equal(await q.get(), 'fills the queue');
    for (const t of [kept, ...many]) t.release();
    q.close();
  });

  test('close(): waiting gets and puts reject with QueueClosedError, later calls too', async () => {
    const q = new mp.Queue<number>({ maxsize: 1 });
    await q.put(1);
    const get2 = q.get(); // takes 1
    const put = q.put(2);
    const put3 = q.put(3);
    assert.equal(await get2, 1);
    await put;
    q.close();
    await assert.rejects(put3, code('ERR_TP_QUEUE_CLOSED', mp.QueueClosedError));
    await assert.rejects(q.get(), code('ERR_TP_QUEUE_CLOSED', mp.QueueClosedError));
    await assert.rejects(q.put(1), code('ERR_TP_QUEUE_CLOSED', mp.QueueClosedError));
    assert.equal(q.isClosed(), true);
    q.close(); // twice is fine
  });

  test('bad options: InvalidArgumentError', async () => {
    assert.throws(() => new mp.Queue({ maxsize: 1.5 }), code('ERR_TP_INVALID_ARGUMENT', mp.InvalidArgumentError));
    assert.throws(() => new mp.Queue({ maxsize: 2 ** 40 }), code('ERR_TP_INVALID_ARGUMENT', mp.InvalidArgumentError));
    const q = new mp.Queue();
    await assert.rejects(q.get({ timeout: -1 }), code('ERR_TP_INVALID_ARGUMENT', mp.InvalidArgumentError));
    await assert.rejects(q.put(1, { timeout: Number.NaN }), code('ERR_TP_INVALID_ARGUMENT', mp.InvalidArgumentError));
    q.close();
  });

  test('a value that cannot travel is refused before anything is sent', async () => {
    const q = new mp.Queue();
    await assert.rejects(
      q.put({ batch: { meta: { fn: () => 1 } } }),
      (e: any) => e instanceof mp.NotTransferableError && e.path === 'batch.meta.fn',
    );
    const full = new mp.Queue({ maxsize: 1 });
    await full.put(0);
    await assert.rejects(
      full.put({ f: Symbol('x') }),
      (e: any) => code('ERR_TP_NOT_TRANSFERABLE', mp.NotTransferableError)(e) && e.path === 'f',
    );
    assert.equal(q.empty(), true);
    q.close();
    full.close();
  });

  test('a queue sent inside a message works, and comes back as the same object', async () => {
    const q = new mp.Queue();
    const reply = new mp.Queue<string>();
    await q.put({ reply });
    const got = (await q.get()) as { reply: mp.Queue<string> };
    assert.equal(got.reply, reply);
    q.close();
    reply.close();
  });

  test('queues, a pipe end and an event in spawn arguments, both start methods', async () => {
    for (const startMethod of ['spawn', 'thread'] as const) {
      const go = new mp.Event();
      const done = new mp.Event();
      const ctx = await mp.startProcesses(target('eventRelay'), { args: [go, done], startMethod, join: false });
      assert.equal(done.isSet(), false);
      go.set();
      assert.equal(await done.wait(20_000), true);
      assert.equal(await ctx.join(), true);
      go.close();
      done.close();
      const [a, b] = mp.Pipe();
      const echo = await mp.startProcesses(target('pipeEcho'), { args: [b], startMethod, join: false });
      const t = mp.full([2], 9);
      await a.send({ t, s: 'hi' });
      const back = (await a.recv()) as { t: mp.Tensor; s: string };
      assert.equal(back.s, 'hi');
      assert.deepEqual(back.t.toArray(), [9, 9]);
      await a.send(null);
      assert.equal(await echo.join(), true);
      a.close();
      b.close();
      t[Symbol.dispose]();
      back.t[Symbol.dispose]();
    }
  });
});

describe('Queue: joinThread and cancelJoinThread (torch join_thread, cancel_join_thread)', () => {
  test('joinThread() resolves once everything put has gone into the queue, not before', async () => {
    const q = new mp.Queue<{ k: number; pad: string }>();
    for (let k = 0; k < 100; k++) await q.put({ k, pad: 'x'.repeat(30000) }); // 3 MB: most waits in this process
    let flushed = false;
    const joined = q.joinThread().then(() => (flushed = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(flushed, false, 'messages are still waiting in this process');
    for (let k = 0; k < 100; k++) assert.equal((await q.get()).k, k);
    await joined;
    assert.equal(flushed, true);
    await q.joinThread(); // nothing kept: at once
    q.close();
  });

  for (const startMethod of ['spawn', 'thread'] as const) {
    test(`a ${startMethod === 'spawn' ? 'process' : 'thread'} that returns with messages unsent delivers them all before it exits`, async () => {
      const q = new mp.Queue<{ k: number; t: mp.Tensor }>({ maxsize: 1000 });
      const ctx = mp.startProcesses(target('putManyAndReturn'), { args: [q, false], join: false, startMethod });
      try {
        for (let k = 0; k < 400; k++) {
          const m = await q.get();
          assert.equal(m.k, k);
          m.t.release();
        }
      } finally {
        while (!(await ctx.join()));
      }
      assert.equal(q.qsize(), 0);
      q.close();
    });

    test(`after cancelJoinThread() a ${startMethod === 'spawn' ? 'process' : 'thread'} exits without waiting for its consumers, and what it left unsent is given back`, async () => {
      const q = new mp.Queue<{ k: number; t: mp.Tensor }>({ maxsize: 1000 });
      // Nobody reads until the child has exited: without the cancel it would wait for good.
      await mp.startProcesses(target('putManyAndReturn'), { args: [q, true], startMethod });
      const got = await drain(q);
      assert.deepEqual(
        got.map((m) => m.k),
        got.map((_, k) => k),
        'in order, from the first',
      );
      for (const storage of new Set(got.map((m) => m.t.storage))) storage.release(); // one storage, held once
      assert.ok(got.length > 0 && got.length < 400, `${got.length} of 400 went out before the exit`);
      assert.equal(q.qsize(), 0, 'no slot is held by a message that will never arrive');
      q.close();
    });
  }
});

describe('SimpleQueue', () => {
  test('put, get, empty, close', async () => {
    const q = new mp.SimpleQueue<{ t: mp.Tensor }>();
    assert.equal(q.empty(), true);
    const t = mp.full([3], 2);
    await q.put({ t });
    assert.equal(q.empty(), false);
    const got = await q.get();
    assert.equal(got.t.storage, t.storage);
    q.close();
    await assert.rejects(q.get(), code('ERR_TP_QUEUE_CLOSED', mp.QueueClosedError));
    await assert.rejects(q.put({ t }), code('ERR_TP_QUEUE_CLOSED', mp.QueueClosedError));
    assert.throws(() => q.empty(), code('ERR_TP_QUEUE_CLOSED', mp.QueueClosedError));
    t.release();
  });

  test('a worker thread that exits with messages still unsent gives back their descriptors and references', async () => {
    // The file's leak check (no descriptor left open, nothing in /dev/shm) is the assertion:
    // threads share the process's descriptors, so what the thread kept would show here.
    const q = new mp.SimpleQueue<{ k: number }>();
    await mp.startProcesses(target('putManyThenExit'), { args: [q, false], startMethod: 'thread' });
    const first = await q.get();
    assert.equal(first.k, 0, 'what went out before the exit arrives');
    q.close();
  });

  // A process child that is terminated loses them (as torch's semaphore does): see the note
  // above `backlogged` in endpoint.ts.
  test('a bounded queue whose producer thread is terminated with messages unsent gets their slots back', async () => {
    // NOTE [Stopping a thread child]: the stop runs the thread's exit hooks.
    const q = new mp.Queue<{ k: number }>({ maxsize: 8 });
    const ready = new mp.Event();
    const ctx = mp.startProcesses(target('fillThenWait'), { args: [q, ready], join: false, startMethod: 'thread' });
    try {
      assert.equal(await ready.wait(), true);
      ctx.processes[0]!.terminate();
      await assert.rejects(ctx.join(), (e: unknown) => e instanceof mp.ProcessExitedException && e.signalName === 'SIGTERM');
    } finally {
      await reap(ctx);
    }
    const got = (await drain(q)).length;
    assert.ok(got < 8, `${got} of 8 went out before the signal`);
    assert.equal(q.qsize(), 0, 'no slot is held by a message that will never arrive');
    for (let k = 0; k < 8; k++) await q.putNowait({ k }); // the whole queue is usable again
    assert.equal(q.full(), true);
    q.close();
    ready.close();
  });

  for (const [startMethod, close] of [
    ['thread', false],
    ['thread', true],
    ['spawn', false],
  ] as const) {
    test(`a bounded queue${close ? ' closed by its producer' : ''} whose ${startMethod === 'thread' ? 'thread' : 'process'} exits with messages unsent gets their slots back`, async () => {
      const q = new mp.Queue<{ k: number }>({ maxsize: 1000 });
      await mp.startProcesses(target('putManyThenExit'), { args: [q, close], startMethod });
      const got = (await drain(q)).length;
      assert.ok(got > 0 && got < 400, `${got} of 400 went out before the exit`);
      assert.equal(q.qsize(), 0, 'no slot is held by a message that will never arrive');
      q.close();
    });
  }
});

describe('Pipe', () => {
  test('an end whose peer closed with messages of ours unread still receives what was sent to it, then PipeClosedError', async () => {
    // The peer's close leaves ECONNRESET pending here, which recvmsg reports ahead of the messages.
    const [a, b] = mp.Pipe();
    await a.send('m1');
    await b.send('m2'); // never read by a
    a.close();
    assert.equal(await b.recv(), 'm1');
    await assert.rejects(b.recv(), code('ERR_TP_PIPE_CLOSED', mp.PipeClosedError));
    b.close();

    const [c, d] = mp.Pipe();
    await d.send('m2'); // never read by c
    const pending = d.recv();
    c.close();
    await assert.rejects(pending, code('ERR_TP_PIPE_CLOSED', mp.PipeClosedError));
    d.close();
  });

  test('duplex send/recv/poll', async () => {
    const [a, b] = mp.Pipe();
    assert.equal(await b.poll(), false);
    assert.equal(await b.poll(10), false);
    const polled = b.poll(null);
    await a.send([1, 2]);
    assert.equal(await polled, true);
    assert.deepEqual(await b.recv(), [1, 2]);
    await b.send('back');
    assert.equal(await a.recv(), 'back');
    a.close();
    b.close();
  });

  test('polls and receives wait together; a timed-out poll leaves a receive waiting; close settles polls', async () => {
    const [a, b] = mp.Pipe();
    const short = b.poll(20);
    const long = b.poll(null);
    const received = b.recv();
    assert.equal(await short, false, 'the short poll times out');
    await a.send('x'); // after the short poll gave up: the receive and the long poll still wait
    assert.equal(await long, true);
    assert.equal(await received, 'x');
    const pending = b.poll(null);
    b.close();
    await assert.rejects(pending, code('ERR_TP_QUEUE_CLOSED', mp.QueueClosedError));
    a.close();
  });

  test('the other end closed: PipeClosedError on recv and on send', async () => {
    const [a, b] = mp.Pipe();
    const waiting = b.recv();
    a.close();
    await assert.rejects(waiting, code('ERR_TP_PIPE_CLOSED', mp.PipeClosedError));
    await assert.rejects(b.send(1), code('ERR_TP_PIPE_CLOSED', mp.PipeClosedError));
    b.close();
  });

  test('one-way pipes refuse the wrong direction; connections are not made with new', async () => {
    const [r, w] = mp.Pipe(false);
    await assert.rejects(r.send(1), code('ERR_TP_INVALID_ARGUMENT', mp.InvalidArgumentError));
    await assert.rejects(w.recv(), code('ERR_TP_INVALID_ARGUMENT', mp.InvalidArgumentError));
    await w.send(5);
    assert.equal(await r.recv(), 5);
    assert.throws(() => new mp.Connection(), code('ERR_TP_INVALID_ARGUMENT', mp.InvalidArgumentError));
    r.close();
    w.close();
  });
});

describe('Event', () => {
  test('set, clear, isSet, wait with and without timeout', async () => {
    const e = new mp.Event();
    assert.equal(e.isSet(), false);
    assert.equal(await e.wait(0), false);
    assert.equal(await e.wait(20), false);
    const waiting = e.wait();
    e.set();
    assert.equal(await waiting, true);
    assert.equal(e.isSet(), true);
    e.clear();
    assert.equal(e.isSet(), false);
    await assert.rejects(e.wait(-5), code('ERR_TP_INVALID_ARGUMENT', mp.InvalidArgumentError));
    e.close();
    assert.throws(() => e.set(), code('ERR_TP_QUEUE_CLOSED', mp.QueueClosedError));
  });

  test('a set(); clear() pulse ends a wait that began before it (threading.Event), with or without a timeout', async () => {
    // NOTE [Event generations]: the waiter wakes to a clear flag, yet a set() happened.
    const e = new mp.Event();
    const forever = e.wait();
    const bounded = e.wait(60_000);
    e.set();
    e.clear();
    assert.equal(await forever, true);
    assert.equal(await bounded, true);
    assert.equal(await e.wait(0), false, 'a wait that begins after the pulse does not see it');
    e.close();
  });

  test('a pulse from another process ends a wait here', async () => {
    const pulse = new mp.Event();
    const waiting = pulse.wait();
    await mp.startProcesses(target('pulse'), { args: [pulse] });
    assert.equal(await waiting, true);
    pulse.close();
  });

  test('close() while a wait is pending: the wait rejects with QueueClosedError', async () => {
    const e = new mp.Event();
    const waiting = e.wait();
    e.close();
    await assert.rejects(waiting, code('ERR_TP_QUEUE_CLOSED', mp.QueueClosedError));
  });
});

describe('waiting keeps the owner alive (NOTE [Waiting keeps the owner alive])', () => {
  test('queues, simple queues and pipe ends dropped with nothing pending are collected, and their descriptors closed', async () => {
    await collectGarbage();
    mp.emptyCache(); // the receive reserve, which a get would close (NOTE [Receive reserve])
    const before = openFds();
    const refs: WeakRef<object>[] = [];
    (() => {
      for (let i = 0; i < 10; i++) {
        const q = new mp.Queue();
        const sq = new mp.SimpleQueue();
        const [a, b] = mp.Pipe();
        void q.get({ timeout: 0 }).catch(() => {}); // a wait that is over: nothing pending now
        refs.push(new WeakRef(q), new WeakRef(sq), new WeakRef(a), new WeakRef(b));
      }
    })();
    assert.ok(openFds().size >= before.size + 10 * 7, 'they hold descriptors while alive');
    await waitFor(async () => {
      await collectGarbage();
      return refs.every((r) => r.deref() === undefined);
    });
    const left = [...openFds()].filter(([fd, target]) => before.get(fd) !== target);
    assert.deepEqual(left, [], 'every descriptor closed by the collector');
  });

  test('a queue reachable only through its pending get is not closed by the collector', async () => {
    const settled: string[] = [];
    let ref!: WeakRef<mp.Queue<number>>;
    (() => {
      const q = new mp.Queue<number>();
      ref = new WeakRef(q);
      q.get().then(
        (v) => settled.push(`got ${v}`),
        (e) => settled.push(`get ${e.code}`),
      );
    })();
    await collectGarbage();
    const q = ref.deref();
    assert.ok(q !== undefined, 'the waiting queue is still alive');
    assert.deepEqual(settled, [], 'and its get was not rejected');
    await q.put(7);
    await waitFor(() => settled.length > 0);
    assert.deepEqual(settled, ['got 7']);
    q.close();
  });
});

describe('construction that fails half-way', () => {
  test('a queue, pipe or event whose identity cannot be read is refused with a coded error and leaves no descriptor open', async () => {
    // fstat of a descriptor just made cannot fail on its own: the failure is injected, as the
    // only way to reach this cleanup path.
    const { addon } = await import('../../src/native/index.js');
    const real = addon.fstat;
    const before = new Set(openFds().keys());
    const makers: [string, () => unknown][] = [
      ['Queue', () => new mp.Queue()],
      ['SimpleQueue', () => new mp.SimpleQueue()],
      ['Pipe', () => mp.Pipe()],
      ['Event', () => new mp.Event()],
    ];
    for (const [name, make] of makers) {
      addon.fstat = () => {
        throw Object.assign(new Error('input/output error'), { code: 'EIO', errno: 5, syscall: 'fstat' });
      };
      try {
        assert.throws(make, code('ERR_TP_SYSTEM', mp.TensorprocSystemError), name);
      } finally {
        addon.fstat = real;
      }
    }
    await collectGarbage(); // nothing may depend on the collector: this only rules it out as the reason
    assert.deepEqual(
      [...openFds().keys()].filter((fd) => !before.has(fd)),
      [],
    );
  });
});
