// What a hostile (or careless) caller passes is a coded error with nothing lost, never a
// hang, a crash or a silent misreading (issue 10, items 9 to 11): values that contain
// themselves or are nested past any stack, revoked Proxies, options of the wrong type, and
// a loop of puts and gets that complete at once, which must still let timers run (NOTE
// [Letting the loop turn], event-loop.ts).
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from 'tensorproc';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';

checkLeaks();

const invalid = isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
const notTransferable = isCoded(mp.NotTransferableError, 'ERR_TP_NOT_TRANSFERABLE');

function nested(levels: number): unknown[] {
  let v: unknown[] = [1];
  for (let i = 0; i < levels; i++) v = [v];
  return v;
}

function revoked(target: object): object {
  const r = Proxy.revocable(target, {});
  r.revoke();
  return r.proxy;
}

describe('tensor()', () => {
  test('an array that contains itself is ERR_TP_INVALID_SHAPE, not an endless loop', () => {
    const a: unknown[] = [1];
    a[0] = a;
    assert.throws(
      () => mp.tensor(a),
      (e: any) => isCoded(mp.InvalidShapeError, 'ERR_TP_INVALID_SHAPE')(e) && /contains itself/.test(e.message),
    );
  });

  test('10,000 levels of nesting are ERR_TP_INVALID_SHAPE, not a bare RangeError', () => {
    assert.throws(() => mp.tensor(nested(10_000)), isCoded(mp.InvalidShapeError, 'ERR_TP_INVALID_SHAPE'));
    assert.deepEqual(mp.tensor(nested(63)).shape.length, 64, '64 dimensions are still fine');
  });

  test('a revoked Proxy, as the data or inside it, is ERR_TP_INVALID_ARGUMENT with the engine error as its cause', () => {
    for (const data of [revoked([]), [revoked([]), [1]], [[1], revoked([])]]) {
      assert.throws(
        () => mp.tensor(data),
        (e: any) => invalid(e) && e.cause instanceof TypeError,
      );
    }
  });

  test('options of the wrong type are refused: shared, dtype null, a bigint into float32, numbers mixed with bigints', () => {
    assert.throws(() => mp.empty([2], { shared: 'yes' as any }), invalid);
    assert.throws(() => mp.zeros([2], { shared: 1 as any }), invalid);
    assert.throws(() => mp.empty([2], { dtype: null as any }), isCoded(mp.InvalidDtypeError, 'ERR_TP_INVALID_DTYPE'));
    assert.throws(() => mp.tensor([1, 2], { dtype: null as any }), isCoded(mp.InvalidDtypeError, 'ERR_TP_INVALID_DTYPE'));
    assert.throws(() => mp.tensor([1], 'int64' as any), invalid);
    assert.throws(
      () => mp.full([2], 1n),
      (e: any) => invalid(e) && /Number\(\)/.test(e.message),
    );
    assert.throws(() => mp.full([2], 1n, { dtype: 'float16' }), invalid);
    assert.throws(() => mp.tensor([1, 2n]), invalid);
    assert.throws(() => mp.zeros([2]).fill(3n), invalid);
    // What is right goes on working: bigints into int64 and bool, numbers into int64, casts by copy().
    assert.deepEqual(mp.full([2], 3n, { dtype: 'int64' }).toArray(), [3n, 3n]);
    assert.deepEqual(mp.tensor([1n, 2]).toArray(), [1n, 2n]);
    assert.deepEqual(mp.tensor([0n, 2n], { dtype: 'bool' }).toArray(), [false, true]);
    assert.deepEqual(
      mp
        .zeros([2])
        .copy(mp.tensor([5n, 6n]))
        .toArray(),
      [5, 6],
    );
    assert.deepEqual(mp.empty([1], { shared: false }).shape, [1]);
  });
});

describe('messages', () => {
  test('10,000 levels of nesting in put(), send() and a SimpleQueue are ERR_TP_NOT_TRANSFERABLE, and the queue goes on', async () => {
    const q = new mp.Queue();
    const sq = new mp.SimpleQueue();
    const [a, b] = mp.Pipe();
    try {
      const deep = { batch: nested(10_000) };
      await assert.rejects(q.put(deep), notTransferable);
      await assert.rejects(sq.put(deep), notTransferable);
      await assert.rejects(a.send(deep), notTransferable);
      await q.put('after');
      assert.equal(await q.get({ timeout: 0 }), 'after');
      await a.send('after');
      assert.equal(await b.recv(), 'after');
    } finally {
      for (const x of [q, sq, a, b]) x.close();
    }
  });

  test('a revoked Proxy as the message, or in it, is ERR_TP_NOT_TRANSFERABLE', async () => {
    const q = new mp.Queue();
    const [a, b] = mp.Pipe();
    try {
      for (const v of [revoked([]), revoked({}), { p: revoked([]) }, [1, revoked({})]]) {
        await assert.rejects(q.put(v), notTransferable);
        await assert.rejects(a.send(v), notTransferable);
      }
      assert.equal(q.empty(), true, 'nothing was sent');
    } finally {
      for (const x of [q, a, b]) x.close();
    }
  });

  test('options of the wrong type: get("5") and put(x, "x") are refused at once (get("5") waited for ever), new Queue("x") and Pipe("yes") too', async () => {
    const q = new mp.Queue();
    try {
      await assert.rejects(q.get('5' as any), invalid);
      await assert.rejects(q.get(5 as any), invalid);
      await assert.rejects(q.put(1, 'x' as any), invalid);
      assert.equal(q.empty(), true, 'the refused put sent nothing');
      assert.throws(() => new mp.Queue('x' as any), invalid);
      assert.throws(() => new mp.Queue(true as any), invalid);
      assert.throws(() => mp.Pipe('yes' as any), invalid);
      assert.throws(() => mp.Pipe(1 as any), invalid);
      // The forms that are right.
      new mp.Queue(4).close();
      new mp.Queue({ maxsize: 4 }).close();
      for (const end of mp.Pipe(false)) end.close();
      await q.put(1, { timeout: 10 });
      assert.equal(await q.get({ timeout: 10 }), 1);
    } finally {
      q.close();
    }
  });
});

describe('a loop of operations that complete at once lets the event loop turn', () => {
  // Without the turns, the timer never fires and the loop runs to its bound.
  const BOUND = 200_000;
  async function spin(step: () => Promise<unknown>): Promise<number> {
    let fired = false;
    const timer = setTimeout(() => (fired = true), 0);
    let n = 0;
    try {
      while (!fired && n < BOUND) {
        await step();
        n++;
      }
    } finally {
      clearTimeout(timer);
    }
    return n;
  }

  test('Queue put + get, SimpleQueue put + get, Pipe send + recv', async () => {
    const q = new mp.Queue<number>();
    const sq = new mp.SimpleQueue<number>();
    const [a, b] = mp.Pipe<number>();
    const t = mp.zeros([4], { shared: true });
    try {
      for (const [what, step] of [
        [
          'Queue',
          async () => {
            await q.put(1);
            await q.get();
          },
        ],
        [
          'Queue of a tensor',
          async () => {
            await q.put(t as any);
            await q.get();
          },
        ], // received in the process that sent it: the same storage
        [
          'SimpleQueue',
          async () => {
            await sq.put(1);
            await sq.get();
          },
        ],
        [
          'Pipe',
          async () => {
            await a.send(1);
            await b.recv();
          },
        ],
      ] as const) {
        const n = await spin(step);
        assert.ok(n < BOUND, `${what}: the timer did not fire in ${n} iterations`);
      }
    } finally {
      t.release();
      for (const x of [q, sq, a, b]) x.close();
    }
  });
});
