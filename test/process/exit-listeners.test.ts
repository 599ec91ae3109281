// NOTE [One exit listener]: a child that uses the library adds one 'exit' listener to its
// process object, not one per layer (a worker thread under file_system had 11 with Node's own,
// and Node printed MaxListenersExceededWarning into the user's output for each such thread).
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import * as mp from 'tensorproc';
import { checkLeaks } from '../helpers/leaks.js';
import { reap } from '../helpers/procs.js';

checkLeaks();

afterEach(() => mp.setSharingStrategy('file_descriptor'));

const target = { module: new URL('./fixtures/exit-listeners.js', import.meta.url), export: 'countExitListeners' };

/** 'exit' listeners of a bare worker thread: Node's own. */
async function bareThreadListeners(): Promise<number> {
  const w = new Worker("require('node:worker_threads').parentPort.postMessage(process.listenerCount('exit'))", { eval: true });
  const [count] = await Promise.all([new Promise<number>((r) => w.once('message', r)), new Promise((r) => w.once('exit', r))]);
  return count;
}

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  for (const startMethod of ['thread', 'spawn'] as const) {
    test(`${strategy}, ${startMethod}: a child using segments, a queue and a lock has one exit listener of the library's`, async () => {
      mp.setSharingStrategy(strategy);
      const baseline = startMethod === 'thread' ? await bareThreadListeners() : 0;
      const q = new mp.Queue<{ count: number; t: mp.Tensor }>();
      let ctx: mp.ProcessContext | undefined;
      try {
        ctx = await mp.startProcesses(target, { args: [q], startMethod, join: false });
        const { count, t } = await q.get();
        t.release();
        // The library's: the hooks' one listener and the transport's backlog hook, which must
        // run before every other (endpoint.ts); Node's: a worker's stdio flush, and its
        // listener for a module whose top-level await is still pending (the target's, here).
        assert.ok(
          count - baseline <= 3,
          `${count} exit listeners, ${baseline} of a bare ${startMethod === 'thread' ? 'thread' : 'process'}`,
        );
        assert.equal(await ctx.join(), true);
      } finally {
        await reap(ctx);
        q.close();
      }
    });
  }
}
