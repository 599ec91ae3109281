// A Pool's life: `await using` (close and join: the work started in the block finishes),
// terminate() + join() leaving no process, segment or descriptor, a single-file program
// whose task function is in its own entry module (main code awaited at top level), a task
// module that starts a pool at its top level, and the seed program of examples/.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { checkLeaks, collectGarbage, namesHeldBy, shmSegments } from '../helpers/leaks.js';
import { waitFor } from '../helpers/wait.js';
import { isCoded } from '../helpers/errors.js';
import { running } from '../helpers/procs.js';
import { fixture, startPeer } from '../helpers/child.js';
import { openPool, stopPoolsAfter, task } from './pools.js';
import {
  Event as MpEvent,
  Pool,
  PoolTerminatedError,
  TargetLoadError,
  emptyCache,
  getSharingStrategy,
  setSharingStrategy,
  type StartMethod,
  type Tensor,
} from 'tensorproc';

stopPoolsAfter();
checkLeaks();

const TIMEOUT = { timeout: 60_000 };
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

for (const startMethod of ['spawn', 'thread'] as StartMethod[]) {
  describe(`pool lifecycle, startMethod '${startMethod}'`, () => {
    it('await using: leaving the block lets the calls made in it finish, then the workers exit', TIMEOUT, async () => {
      let results: number[] | null = null;
      let pids: number[] = [];
      {
        await using pool = new Pool({ processes: 2, startMethod });
        void pool.map<number>(task('later'), range(300), { chunksize: 1 }).then((r) => (results = r));
        await pool.apply(task('square'), [1]);
        pids = pool.pids();
      }
      assert.deepEqual(
        results,
        range(300).map((x) => x * 10),
      );
      if (startMethod === 'spawn') for (const pid of pids) assert.equal(running(pid), false);
    });

    it('terminate() + join(): the calls reject, and no worker, segment or descriptor is left', TIMEOUT, async () => {
      for (const strategy of ['file_descriptor', 'file_system'] as const) {
        const saved = getSharingStrategy();
        setSharingStrategy(strategy);
        try {
          const pool = openPool({ processes: 2, startMethod });
          const made = await pool.map<Tensor>(task('makeTensor'), range(8));
          // Both workers run a task before the pool is terminated: a worker still importing the
          // task module when terminated (one that the 8 tasks above did not reach) could leave
          // that import's descriptor to close after the file's leak check, under 'thread'.
          const started = [new MpEvent(), new MpEvent()];
          const release = new MpEvent();
          const held = started.map((s) => pool.apply(task('block'), [s, release]));
          for (const s of started) await s.wait(); // the second is stolen by the idle worker if both went to one
          const queued = pool.map(task('makeTensor'), range(50), { chunksize: 1 }); // behind two busy workers
          const pids = pool.pids();
          pool.terminate();
          for (const h of held) await assert.rejects(h, isCoded(PoolTerminatedError, 'ERR_TP_POOL_TERMINATED'));
          await assert.rejects(queued, isCoded(PoolTerminatedError, 'ERR_TP_POOL_TERMINATED'));
          await pool.join();
          assert.deepEqual(pool.pids(), []);
          if (startMethod === 'spawn') for (const pid of pids) assert.equal(running(pid), false);
          for (const t of made) t.release();
          for (const s of started) s.close();
          release.close();
        } finally {
          setSharingStrategy(saved);
        }
      }
      // The file's leak check looks for what is left in /dev/shm and among descriptors.
    });

    it('terminate(): the results a call had received and will never hand out are let go of (file_system)', TIMEOUT, async () => {
      const saved = getSharingStrategy();
      setSharingStrategy('file_system');
      try {
        const pool = openPool({ processes: 2, startMethod });
        const started = new MpEvent();
        const release = new MpEvent();
        const held = pool.apply(task('block'), [started, release]);
        await started.wait();
        // The blocked worker is given one of the map's chunks behind its task (a window of 2),
        // so the map cannot finish; the other worker runs the rest, then the probe, whose
        // result comes after theirs: once it is back, the map holds 39 tensors it received.
        const partial = pool.map<Tensor>(task('makeTensor'), range(40), { chunksize: 1 });
        assert.equal(await pool.apply(task('square'), [3]), 9);
        assert.ok(namesHeldBy(process.pid).length > 0);
        pool.terminate();
        await assert.rejects(partial, isCoded(PoolTerminatedError, 'ERR_TP_POOL_TERMINATED'));
        await assert.rejects(held, isCoded(PoolTerminatedError, 'ERR_TP_POOL_TERMINATED'));
        await pool.join();
        // The pool is still referenced here (and by openPool): what it keeps, it would keep.
        await waitFor(async () => {
          await collectGarbage();
          emptyCache();
          return namesHeldBy(process.pid).length === 0;
        });
        assert.deepEqual(pool.pids(), []);
        started.close();
        release.close();
      } finally {
        setSharingStrategy(saved);
      }
    });

    it("a task function exported from the program's own entry module, its main code awaited at top level", TIMEOUT, async () => {
      const peer = startPeer(fixture(import.meta.url, 'self-pool.js'), [startMethod]);
      assert.deepEqual(await peer.next(), [1, 8, 27, 64]);
      assert.deepEqual(await peer.exited, { code: 0, signal: null });
    });

    it('a task module that starts a pool at its top level is refused in the worker, with the fix in the message', TIMEOUT, async () => {
      const pool = openPool({ processes: 1, startMethod });
      const unguarded = { module: new URL('./fixtures/unguarded.js', import.meta.url), export: 'twice' };
      const e = await pool.apply(unguarded, [2]).then(
        () => null,
        (err: unknown) => err,
      );
      isCoded(TargetLoadError, 'ERR_TP_TARGET_LOAD')(e);
      assert.equal(((e as Error).cause as { code?: string }).code, 'ERR_TP_SPAWN_IN_BOOTSTRAP');
      assert.match((e as Error).message, /parentProcess\(\) === null/);
      assert.equal(await pool.apply(task('square'), [2]), 4);
    });
  });
}

describe('examples', () => {
  it("the Chinese seed's program: file_system, Pool(4).map over shared data, each worker computing on it", TIMEOUT, async () => {
    const script = fileURLToPath(new URL('../../examples/seed-pool.js', import.meta.url));
    const peer = startPeer(script, ['--json']);
    const report = await peer.next();
    assert.equal(report.strategy, 'file_system');
    assert.equal(report.processes, 4);
    assert.equal(report.results.length, 4);
    assert.deepEqual(report.mismatches, []);
    assert.deepEqual(await peer.exited, { code: 0, signal: null });
    // file_system: the program's names go when the manager has seen its last user exit (within
    // the 2 s promised, NOTE [Reference slots]); the suite's leak check must not race that.
    const prefixes = [peer.child.pid!, ...report.results.map((r: { pid: number }) => r.pid)].map((p) => `tensorproc_${p}_`);
    await waitFor(() => !shmSegments().some((n) => prefixes.some((p) => n.startsWith(p))));
  });
});
