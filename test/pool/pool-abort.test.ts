// `{ signal }` on Pool calls (NOTE [Pool aborts]): queued tasks are dropped (none of them
// runs), a worker running one is stopped and replaced, other calls go on, and the call
// rejects as Node's own APIs do (name AbortError, code ABORT_ERR, cause the reason). Lazy
// imap over an endless input, and leaving an imap early.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkLeaks } from '../helpers/leaks.js';
import { running } from '../helpers/procs.js';
import { waitFor } from '../helpers/wait.js';
import { openPool, stopPoolsAfter, task } from './pools.js';
import { AbortError, Event as MpEvent, SimpleQueue, type StartMethod } from 'tensorproc';
import { endless } from './fixtures/tasks.js';

stopPoolsAfter();
checkLeaks();

const TIMEOUT = { timeout: 60_000 };
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

let root: string;
before(() => (root = mkdtempSync(join(tmpdir(), 'tensorproc-pool-abort-'))));
after(() => rmSync(root, { recursive: true, force: true }));

/** Asserts `e` is the abort of `reason`, as Node reports one. */
function isAbortOf(reason: unknown): (e: unknown) => true {
  return (e: unknown) => {
    assert.ok(e instanceof AbortError, `expected an AbortError, got ${String(e)}`);
    assert.equal(e.name, 'AbortError');
    assert.equal(e.code, 'ABORT_ERR');
    assert.equal(e.cause, reason);
    return true;
  };
}

for (const startMethod of ['spawn', 'thread'] as StartMethod[]) {
  describe(`aborts, startMethod '${startMethod}'`, () => {
    it("an aborted call's queued tasks are dropped: none of them runs", TIMEOUT, async () => {
      const pool = openPool({ processes: 1, startMethod });
      const started = new MpEvent();
      const release = new MpEvent();
      const busy = pool.apply(task('block'), [started, release]);
      await started.wait();
      const log = join(mkdtempSync(join(root, 'q-')), 'ran');
      const ac = new AbortController();
      const queued = pool.starmap(
        task('note'),
        range(20).map((x) => [log, x]),
        { signal: ac.signal, chunksize: 1 },
      );
      const reason = new Error('not wanted any more');
      ac.abort(reason);
      await assert.rejects(queued, isAbortOf(reason));
      release.set();
      assert.equal(await busy, 'released');
      // One more call through the same worker: whatever it held of the aborted call came before it.
      assert.equal(await pool.apply(task('square'), [4]), 16);
      assert.equal(existsSync(log), false, `aborted tasks ran: ${existsSync(log) ? readFileSync(log, 'utf8') : ''}`);
      started.close();
      release.close();
    });

    it('a running task is stopped, its worker replaced, and the other calls go on', TIMEOUT, async () => {
      const pool = openPool({ processes: 2, startMethod });
      const started = new MpEvent();
      const release = new MpEvent();
      const where = new SimpleQueue<[number, number]>();
      const ac = new AbortController();
      const doomed = pool.apply(task('block'), [started, release, where], { signal: ac.signal });
      await started.wait();
      const [pid, threadId] = await where.get();
      const before = pool.pids();
      const others = pool.map(task('later'), range(100), { chunksize: 1 });
      ac.abort('enough');
      await assert.rejects(doomed, isAbortOf('enough'));
      assert.deepEqual(
        await others,
        range(100).map((x) => x * 10),
      );
      const gone = startMethod === 'spawn' ? pid : threadId;
      assert.ok(before.includes(gone));
      if (startMethod === 'spawn') await waitFor(() => !running(pid));
      await waitFor(() => pool.pids().length === 2 && !pool.pids().includes(gone));
      assert.deepEqual(await pool.map(task('square'), range(5)), [0, 1, 4, 9, 16]);
      for (const x of [started, release, where]) x.close();
    });

    it('a signal already aborted rejects at once; an aborted imap ends its loop with the abort', TIMEOUT, async () => {
      const pool = openPool({ processes: 2, startMethod });
      const reason = new Error('before it began');
      const signal = AbortSignal.abort(reason);
      await assert.rejects(pool.map(task('square'), [1, 2], { signal }), isAbortOf(reason));
      await assert.rejects(pool.apply(task('square'), [1], { signal }), isAbortOf(reason));
      await assert.rejects(pool.imap(task('square'), [1], { signal }).next(), isAbortOf(reason));
      const ac = new AbortController();
      const seen: number[] = [];
      await assert.rejects(async () => {
        for await (const x of pool.imap<number>(task('later'), range(1000), { signal: ac.signal })) {
          seen.push(x);
          if (seen.length === 5) ac.abort('stop here');
        }
      }, isAbortOf('stop here'));
      assert.deepEqual(seen, [0, 10, 20, 30, 40]);
      assert.equal(await pool.apply(task('square'), [3]), 9);
    });

    it('imap reads an endless input lazily, in bounded memory, and leaving it closes the input', TIMEOUT, async () => {
      const pool = openPool({ processes: 2, startMethod });
      const state = new Int32Array(2); // [items read, closed]
      const buffersize = 32;
      let consumed = 0;
      for await (const x of pool.imap<number>(task('square'), endless(state), { chunksize: 3, buffersize })) {
        assert.equal(x, consumed * consumed);
        consumed++;
        // Never more read than buffersize chunks ahead of the chunk being consumed.
        assert.ok(state[0]! - consumed <= (buffersize + 1) * 3, `read ${state[0]} items for ${consumed} consumed`);
        if (consumed === 3000) break;
      }
      assert.equal(state[1], 1, 'the input was not closed');
      assert.equal(await pool.apply(task('square'), [7]), 49);
    });
  });
}
