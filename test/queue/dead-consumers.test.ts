// Memory and descriptors come back from consumers that die holding them (NOTE [Dead
// holders], NOTE [Cache decay] in src/sharing/segment-cache.ts), and a producer keeps going
// whatever its consumers hold (NOTE [Kept descriptors]). This process is the producer; the
// consumers are real children, killed with SIGKILL.
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as mp from '../../src/index.js';
import { checkLeaks, openFds, shmSegments } from '../helpers/leaks.js';
import { waitFor } from '../helpers/wait.js';
import { reap } from '../helpers/procs.js';
import { segmentMemory } from '../helpers/segments.js';

checkLeaks();

const targets = new URL('./fixtures/targets.js', import.meta.url);
const limitTargets = new URL('./fixtures/limit-targets.js', import.meta.url);

afterEach(() => mp.setSharingStrategy('file_descriptor'));

const within = (now: number, start: number): boolean => now <= start * 1.01;

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: after 40 consumers killed holding tensors, the producer's descriptors and shared memory come back`, async (t) => {
    mp.setSharingStrategy(strategy);
    const q = new mp.Queue<mp.Tensor>();
    const ready = new mp.Event();
    mp.emptyCache();
    const { mapped, resident } = segmentMemory();
    const start = { fds: openFds().size, mapped, resident, names: shmSegments().length };
    const held = 8;
    for (let round = 0; round < 40; round++) {
      ready.clear();
      const ctx = mp.spawn({ module: targets, export: 'holdAndWait' }, { args: [q, ready, held, strategy], join: false });
      try {
        for (let k = 0; k < held; k++) {
          const x = mp.empty([256 * 1024], { shared: true }).fill(k); // 1 MiB each, fresh
          await q.put(x);
          x.release();
        }
        assert.equal(await ready.wait(20_000), true);
        process.kill(ctx.pids()[0]!, 'SIGKILL');
        await assert.rejects(ctx.join(), { code: 'ERR_TP_PROCESS_EXITED', signalName: 'SIGKILL' });
      } finally {
        await reap(ctx);
      }
    }
    // Without emptyCache(): what dead holders held is taken back, and free segments decay.
    let now = start;
    const ms = await waitFor(() => {
      const m = segmentMemory();
      now = { fds: openFds().size, mapped: m.mapped, resident: m.resident, names: shmSegments().length };
      return (
        within(now.fds, start.fds) && within(now.mapped, start.mapped) && within(now.resident, start.resident) && now.names <= start.names
      );
    }, 15_000).catch((e: Error) => {
      throw new Error(`${e.message}: at the start ${JSON.stringify(start)}, now ${JSON.stringify(now)}`);
    });
    t.diagnostic(
      `back within 1% ${ms.toFixed(0)} ms after the last kill: at the start ${JSON.stringify(start)}, then ${JSON.stringify(now)}`,
    );
    q.close();
    ready.close();
  });
}

test('a producer under a 256-descriptor limit goes on while its consumer holds 600 of its tensors', async () => {
  const q = new mp.Queue<mp.Tensor>();
  const out = new mp.Queue<unknown>();
  const ctl = new mp.Queue<string>();
  const n = 600;
  const ctx = mp.spawn({ module: limitTargets, export: 'produceUnderLimit' }, { args: [q, out, ctl, n], join: false });
  const got: mp.Tensor[] = [];
  try {
    assert.equal(await out.get(), 'ready');
    execFileSync('prlimit', ['--pid', String(ctx.pids()[0]), '--nofile=256:256']);
    await ctl.put('go');
    for (let k = 0; k < n; k++) got.push(await q.get({ timeout: 20_000 }));
    assert.deepEqual(
      got.map((x) => x.get(0)),
      Array.from({ length: n }, (_, k) => k),
    );
    assert.deepEqual(await out.get(), { sent: n });
    assert.equal(await ctx.join(), true);
  } finally {
    for (const x of got) x.release();
    await reap(ctx);
    for (const x of [q, out, ctl]) x.close();
  }
});
