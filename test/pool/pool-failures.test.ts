// What a Pool does when its workers die (SIGKILL, process.exit, out of memory): exactly the
// task that was running rejects with ProcessExitedException, the worker is replaced, and
// every other task and call goes on (CPython's Pool hangs for ever). Initializers, one that
// throws, and maxtasksperchild.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';
import { running } from '../helpers/procs.js';
import { waitFor } from '../helpers/wait.js';
import { openPool, stopPoolsAfter, task } from './pools.js';
import { Event as MpEvent, PoolBrokenError, ProcessExitedException, SimpleQueue, zeros, type StartMethod } from 'tensorproc';

stopPoolsAfter();
checkLeaks();

const TIMEOUT = { timeout: 120_000 };
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

describe('a worker that dies mid-task', () => {
  it('SIGKILL: only its running task rejects, with the signal; the others finish and the worker is replaced', TIMEOUT, async () => {
    const pool = openPool(2);
    const started = new MpEvent();
    const release = new MpEvent();
    const pids = new SimpleQueue<[number, number]>();
    const doomed = pool.apply(task('block'), [started, release, pids]);
    await started.wait();
    const [pid] = await pids.get();
    // Work queued behind it and beside it: some of it is at the dying worker, not begun.
    const others = pool.map(task('later'), range(200), { chunksize: 1 });
    const one = pool.apply(task('square'), [12]);
    process.kill(pid, 'SIGKILL');
    const e = await doomed.then(
      () => null,
      (err: unknown) => err,
    );
    isCoded(ProcessExitedException, 'ERR_TP_PROCESS_EXITED')(e);
    assert.equal((e as ProcessExitedException).signalName, 'SIGKILL');
    assert.equal((e as ProcessExitedException).exitCode, -9);
    assert.equal((e as ProcessExitedException).pid, pid);
    assert.match((e as Error).message, /terminated with signal SIGKILL/);
    assert.deepEqual(
      await others,
      range(200).map((x) => x * 10),
    );
    assert.equal(await one, 144);
    assert.equal(running(pid), false);
    await waitFor(() => pool.pids().length === 2);
    assert.ok(!pool.pids().includes(pid));
    assert.deepEqual(
      await pool.map(task('square'), range(10)),
      range(10).map((x) => x * x),
    );
    for (const x of [started, release, pids]) x.close();
  });

  for (const startMethod of ['spawn', 'thread'] as StartMethod[]) {
    it(`process.exit() in a task rejects it with the exit code, startMethod '${startMethod}'`, TIMEOUT, async () => {
      const pool = openPool({ processes: 2, startMethod });
      const results = await Promise.allSettled([pool.apply(task('exitWith'), [7]), pool.map(task('square'), range(50))]);
      assert.equal(results[0].status, 'rejected');
      const e = (results[0] as PromiseRejectedResult).reason;
      isCoded(ProcessExitedException, 'ERR_TP_PROCESS_EXITED')(e);
      assert.equal(e.exitCode, 7);
      assert.match(e.message, /terminated with exit code 7/);
      assert.deepEqual(
        (results[1] as PromiseFulfilledResult<number[]>).value,
        range(50).map((x) => x * x),
      );
      assert.equal(await pool.apply(task('square'), [3]), 9);
    });
  }

  it('out of memory: the task rejects with how its worker ended, and the pool goes on', TIMEOUT, async () => {
    const saved = process.env.NODE_OPTIONS;
    process.env.NODE_OPTIONS = `${saved ?? ''} --max-old-space-size=24`;
    let pool;
    try {
      pool = openPool(1);
    } finally {
      if (saved === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = saved;
    }
    const e = await pool.apply(task('exhaustMemory'), []).then(
      () => null,
      (err: unknown) => err,
    );
    isCoded(ProcessExitedException, 'ERR_TP_PROCESS_EXITED')(e);
    // V8 aborts the process (SIGABRT) when its heap is exhausted; the kernel's OOM killer sends SIGKILL.
    assert.ok((e as ProcessExitedException).signalName !== null || (e as ProcessExitedException).exitCode !== 0);
    assert.equal(await pool.apply(task('square'), [5]), 25);
  });
});

for (const startMethod of ['spawn', 'thread'] as StartMethod[]) {
  describe(`initializer and maxtasksperchild, startMethod '${startMethod}'`, () => {
    it('the initializer runs once in each worker, before its tasks, with initargs', TIMEOUT, async () => {
      const counter = zeros([1], { dtype: 'int32', shared: true });
      const pool = openPool({ processes: 2, startMethod, initializer: task('init'), initargs: [counter, 'tagged'] });
      const seen = await pool.map<{ tag: string }>(task('readInit'), range(20), { chunksize: 1 });
      for (const s of seen) assert.equal(s.tag, 'tagged');
      pool.close();
      await pool.join();
      assert.equal((counter.data as Int32Array)[0], 2);
    });

    it('an initializer that throws fails the pool with its error, and no worker is started again', TIMEOUT, async () => {
      const counter = zeros([1], { dtype: 'int32', shared: true });
      const pool = openPool({ processes: 2, startMethod, initializer: task('initThrows'), initargs: [counter] });
      const broken = isCoded(PoolBrokenError, 'ERR_TP_POOL_BROKEN');
      const e = await pool.map(task('square'), range(10)).then(
        () => null,
        (err: unknown) => err,
      );
      broken(e);
      assert.match((e as Error).message, /initializer threw in worker \d: the initializer fails on purpose/);
      assert.equal(((e as Error).cause as Error).message, 'the initializer fails on purpose');
      await assert.rejects(pool.apply(task('square'), [1]), broken);
      await pool.join();
      assert.equal(pool.pids().length, 0);
      assert.ok((counter.data as Int32Array)[0]! <= 2, `the initializer ran ${(counter.data as Int32Array)[0]} times`);
    });

    // A worker's start (a Node process or thread, the library's import) is what this costs:
    // 100 of them for processes, fewer for threads, whose start costs as much.
    const n = startMethod === 'spawn' ? 100 : 30;
    it(`maxtasksperchild 1 over ${n} tasks: each task in a worker of its own, none lost, none twice`, TIMEOUT, async () => {
      const pool = openPool({ processes: 2, startMethod, maxtasksperchild: 1 });
      const r = await pool.map<[number, string]>(task('pid'), range(n), { chunksize: 1 });
      assert.deepEqual(
        r.map(([x]) => x),
        range(n),
      );
      assert.equal(new Set(r.map(([, w]) => w)).size, n);
    });

    it('maxtasksperchild 3: no worker runs more than 3 tasks', TIMEOUT, async () => {
      const pool = openPool({ processes: 2, startMethod, maxtasksperchild: 3 });
      const r = await pool.map<[number, string]>(task('pid'), range(30), { chunksize: 1 });
      assert.deepEqual(
        r.map(([x]) => x),
        range(30),
      );
      const per = new Map<string, number>();
      for (const [, w] of r) per.set(w, (per.get(w) ?? 0) + 1);
      for (const n of per.values()) assert.ok(n <= 3);
      assert.ok(per.size >= 10);
    });
  });
}
