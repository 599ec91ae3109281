// Pool calls as CPython's Pool has them (map, starmap, apply, imap, imapUnordered,
// chunksize), under both start methods, and each bad input's class and code.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';
import { openPool, stopPoolsAfter, task } from './pools.js';
import {
  InvalidArgumentError,
  NotTransferableError,
  Pool,
  PoolClosedError,
  PoolRunningError,
  PoolTerminatedError,
  TargetNotFoundError,
  TargetNotFunctionError,
  Event as MpEvent,
  type StartMethod,
} from 'tensorproc';

stopPoolsAfter();
checkLeaks();

const TIMEOUT = { timeout: 60_000 };
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

for (const startMethod of ['spawn', 'thread'] as StartMethod[]) {
  describe(`pool calls, startMethod '${startMethod}'`, () => {
    const pool = openPool({ processes: 2, startMethod });

    it('map keeps the order of 10,000 items at chunksize 1 and by default', TIMEOUT, async () => {
      const items = range(10_000);
      assert.deepEqual(
        await pool.map(task('square'), items, { chunksize: 1 }),
        items.map((x) => x * x),
      );
      assert.deepEqual(
        await pool.map(task('square'), items),
        items.map((x) => x * x),
      );
      assert.deepEqual(
        await pool.map(task('square'), new Set(items.slice(0, 10))),
        items.slice(0, 10).map((x) => x * x),
      );
      assert.deepEqual(await pool.map(task('square'), []), []);
    });

    it(
      'long chunks of numbers (sent packed, NOTE [Packed numbers]) arrive as the very numbers, to the task and back',
      TIMEOUT,
      async () => {
        const odd = [-0, NaN, 1.5, 2 ** 40, -(2 ** 31), 2 ** 31, Number.MAX_VALUE, -Infinity, Number.MIN_VALUE];
        const floats = [...range(3_000), ...odd];
        const ints = range(3_000).map((x) => x - 1_500);
        for (const items of [floats, ints]) {
          const back = await pool.map(task('same'), items, { chunksize: 1_500 });
          assert.equal(back.length, items.length);
          items.forEach((x, i) => assert.ok(Object.is(back[i], x), `item ${i}: ${String(back[i])} for ${String(x)}`));
          const given = await pool.map<[unknown, string]>(task('seen'), items, { chunksize: 1_500 });
          assert.ok(
            given.every(([, type]) => type === 'number'),
            'each task got a number',
          );
          assert.ok(Array.isArray(back), 'the results are an array');
          const out: unknown[] = [];
          for await (const x of pool.imap(task('same'), items, { chunksize: 2_000 })) out.push(x);
          items.forEach((x, i) => assert.ok(Object.is(out[i], x), `imap item ${i}`));
        }
        // A long chunk with one item that is not a number travels as it is, whether the numbers
        // before it were all int32s or not.
        const mixed = [...range(2_000), 'two thousand', { n: 1 }];
        assert.deepEqual(await pool.map(task('same'), mixed, { chunksize: 5_000 }), mixed);
        const mixedFloats = [...range(2_000), 0.5, -0, 'two thousand'];
        const backMixed = await pool.map(task('same'), mixedFloats, { chunksize: 5_000 });
        mixedFloats.forEach((x, i) => assert.ok(Object.is(backMixed[i], x), `mixed item ${i}`));
      },
    );

    it('long chunks whose results are numbers, then not, keep every result as it was, and each error', TIMEOUT, async () => {
      // NOTE [Packed numbers]: a worker writes a long chunk's numbers straight into a typed
      // array (int32 ones sent as Int32Array), and from a result that is not a number on, the
      // results as they are (the task is not called twice).
      const { mostlyNumbersHere } = await import('./fixtures/tasks.js');
      const items = range(4_000);
      const back = await pool.map(task('mostlyNumbers'), items, { chunksize: 1_200 });
      assert.ok(Array.isArray(back));
      assert.equal(back.length, items.length);
      items.forEach((x, i) => assert.ok(Object.is(back[i], mostlyNumbersHere(x)), `item ${i}: ${String(back[i])}`));
      const ints = range(3_000).map((x) => (x - 1_500) * 1_000_000);
      assert.deepEqual(await pool.map(task('same'), ints, { chunksize: 1_500 }), ints);
      const big = range(2_000).map((x) => 2n ** 60n + BigInt(x));
      assert.deepEqual(await pool.map(task('same'), big, { chunksize: 2_000 }), big);
      // A task that throws inside a long chunk of numbers fails the map with its error.
      const e = await pool.map(task('failAt'), range(2_000), { chunksize: 2_000 }).then(
        () => assert.fail('failAt(3) resolved'),
        (err: unknown) => err as Error & { code?: string },
      );
      assert.ok(e instanceof RangeError);
      assert.equal(e.code, 'E_THREE');
      // The pool goes on: the next long chunk of numbers runs.
      assert.deepEqual(await pool.map(task('same'), range(2_000), { chunksize: 2_000 }), range(2_000));
    });

    it("map runs chunksize items together in one worker, and by default CPython's ceil(n / (4 × processes))", TIMEOUT, async () => {
      const blocks = async (n: number, size: number, chunksize?: number): Promise<void> => {
        const r = await pool.map<[number, number, number]>(task('where'), range(n), chunksize ? { chunksize } : {});
        for (let from = 0; from < n; from += size) {
          const block = r.slice(from, from + size);
          // One worker ran the block, one item after another.
          assert.equal(new Set(block.map(([, p]) => p)).size, 1, `items ${from}.. ran in more than one worker`);
          for (let k = 1; k < block.length; k++) assert.equal(block[k]![2], block[k - 1]![2] + 1);
        }
      };
      await blocks(100, 10, 10);
      await blocks(100, 13); // ceil(100 / 8)
      await blocks(7, 1);
    });

    it('long chunks go to each worker in turn, also once tiny tasks have grown the windows to many chunks', TIMEOUT, async () => {
      // Windows of hundreds of chunks: one batch of MAX_BATCH chunks once took all 8 of a map.
      await pool.map(task('square'), range(2_000), { chunksize: 1 });
      const r = await pool.map<[number, string]>(task('pid'), range(40_000)); // 8 chunks of 5,000
      assert.equal(new Set(r.map(([, p]) => p)).size, 2, 'every chunk ran in one worker');
      r.forEach(([x], i) => assert.equal(x, i));
    });

    it('starmap, apply, and async functions', TIMEOUT, async () => {
      assert.deepEqual(
        await pool.starmap(task('add'), [
          [1, 2],
          [3, 4],
          [5, 6],
        ]),
        [3, 7, 11],
      );
      assert.equal(await pool.apply(task('add'), [20, 22]), 42);
      assert.deepEqual(await pool.map(task('later'), [1, 2, 3]), [10, 20, 30]);
      assert.deepEqual(
        await pool.map(
          task('square'),
          (async function* () {
            yield 2;
            yield 3;
          })(),
        ),
        [4, 9],
      );
    });

    it('imap yields in order and imapUnordered as they finish, each with every result', TIMEOUT, async () => {
      const out: number[] = [];
      for await (const x of pool.imap<number>(task('square'), range(500), { chunksize: 7 })) out.push(x);
      assert.deepEqual(
        out,
        range(500).map((x) => x * x),
      );
      const un: number[] = [];
      for await (const x of pool.imapUnordered<number>(task('later'), range(200))) un.push(x);
      assert.deepEqual(
        un.sort((a, b) => a - b),
        range(200).map((x) => x * 10),
      );
      const fromAsync: number[] = [];
      async function* gen(): AsyncGenerator<number> {
        for (let i = 0; i < 50; i++) yield i;
      }
      for await (const x of pool.imap<number>(task('square'), gen(), { chunksize: 4 })) fromAsync.push(x);
      assert.deepEqual(
        fromAsync,
        range(50).map((x) => x * x),
      );
    });

    it("a task that throws rejects its call with the worker's error: name, message, stack and fields", TIMEOUT, async () => {
      const e = await pool.map(task('failAt'), range(10), { chunksize: 1 }).then(
        () => null,
        (err: unknown) => err as Error & { code?: string },
      );
      assert.ok(e instanceof Error);
      assert.equal(e.name, 'RangeError');
      assert.equal(e.message, 'three is not allowed (3)');
      assert.equal(e.code, 'E_THREE');
      assert.match(e.stack!, /at failAt \(.*fixtures\/tasks\.(js|ts)/);
      const it = pool.imap(task('failAt'), range(10));
      const seen: unknown[] = [];
      await assert.rejects(async () => {
        for await (const x of it) seen.push(x);
      }, /three is not allowed/);
      assert.deepEqual(seen, [0, 1, 2]);
      assert.deepEqual(await it.next(), { value: undefined, done: true });
      // The pool goes on.
      assert.equal(await pool.apply(task('square'), [9]), 81);
    });

    it('a task module or export that is not there is a coded error from the worker', TIMEOUT, async () => {
      const missing = { module: new URL('./fixtures/no-such-module.js', import.meta.url), export: 'f' };
      await assert.rejects(pool.apply(missing, []), isCoded(TargetNotFoundError, 'ERR_TP_TARGET_NOT_FOUND'));
      await assert.rejects(pool.apply(task('noSuchExport'), []), isCoded(TargetNotFunctionError, 'ERR_TP_TARGET_NOT_FUNCTION'));
      await assert.rejects(pool.map(task('notCallable'), [1, 2]), isCoded(TargetNotFunctionError, 'ERR_TP_TARGET_NOT_FUNCTION'));
    });

    it('values that cannot travel are refused with their path, both ways', TIMEOUT, async () => {
      await assert.rejects(pool.apply(task('square'), [() => 1]), isCoded(NotTransferableError, 'ERR_TP_NOT_TRANSFERABLE'));
      await assert.rejects(pool.apply(task('returnsFunction'), []), isCoded(NotTransferableError, 'ERR_TP_NOT_TRANSFERABLE'));
      assert.deepEqual(await pool.map(task('square'), [1, 2]), [1, 4]);
    });

    it('bad arguments are InvalidArgumentError', TIMEOUT, async () => {
      const bad = isCoded(InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
      await assert.rejects(pool.map({ module: 42 } as never, [1]), bad);
      await assert.rejects(pool.map(task('square'), 42 as never), bad);
      await assert.rejects(pool.map(task('square'), [1], { chunksize: 0 }), bad);
      await assert.rejects(pool.map(task('square'), [1], { signal: {} as never }), bad);
      await assert.rejects(pool.starmap(task('add'), [[1, 2], 3] as never), bad);
      await assert.rejects(pool.apply(task('add'), 3 as never), bad);
      assert.throws(() => pool.imap(task('square'), 42 as never), bad);
      assert.throws(() => pool.imap(task('square'), [1], { buffersize: -1 }), bad);
    });
  });
}

describe('pool options and states', () => {
  it('bad options are InvalidArgumentError, and no worker starts', () => {
    const bad = isCoded(InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    assert.throws(() => new Pool(0), bad);
    assert.throws(() => new Pool({ processes: 1.5 }), bad);
    assert.throws(() => new Pool({ processes: 1, maxtasksperchild: 0 }), bad);
    assert.throws(() => new Pool({ processes: 1, startMethod: 'fork' as never }), bad);
    assert.throws(() => new Pool({ processes: 1, initargs: 'x' as never }), bad);
    assert.throws(() => new Pool({ processes: 1, initializer: { module: 1 } as never }), bad);
    assert.throws(
      () => new Pool({ processes: 1, initializer: task('init'), initargs: [() => 1] }),
      isCoded(NotTransferableError, 'ERR_TP_NOT_TRANSFERABLE'),
    );
  });

  it('calls after close() or terminate() are PoolClosedError; join() before them is PoolRunningError', TIMEOUT, async () => {
    const pool = openPool(1);
    await assert.rejects(pool.join(), isCoded(PoolRunningError, 'ERR_TP_POOL_RUNNING'));
    const pending = pool.map(task('square'), range(100), { chunksize: 1 });
    pool.close();
    const closed = isCoded(PoolClosedError, 'ERR_TP_POOL_CLOSED');
    await assert.rejects(pool.map(task('square'), [1]), closed);
    await assert.rejects(pool.apply(task('square'), [1]), closed);
    assert.throws(() => pool.imap(task('square'), [1]), closed);
    // close() lets the calls made finish.
    assert.deepEqual(
      await pending,
      range(100).map((x) => x * x),
    );
    await pool.join();
    const other = openPool(1);
    other.terminate();
    await assert.rejects(other.map(task('square'), [1]), closed);
    await other.join();
  });

  it('terminate() rejects the calls not finished with PoolTerminatedError, and stops the workers', TIMEOUT, async () => {
    const pool = openPool(1);
    const started = new MpEvent();
    const release = new MpEvent();
    const blocked = pool.apply(task('block'), [started, release]);
    const queued = pool.map(task('square'), range(10));
    await started.wait();
    pool.terminate();
    const terminated = isCoded(PoolTerminatedError, 'ERR_TP_POOL_TERMINATED');
    await assert.rejects(blocked, terminated);
    await assert.rejects(queued, terminated);
    await pool.join();
    assert.equal(pool.pids().length, 0);
    started.close();
    release.close();
  });
});
