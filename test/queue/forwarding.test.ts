// A received tensor sent on, or back to its sender, is the same memory (API.md), however
// many the receiver holds (NOTE [Kept descriptors], src/sharing/descriptors.ts); where a
// copy cannot be avoided it is announced, once, with a coded warning.
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from 'tensorproc';
import { checkLeaks } from '../helpers/leaks.js';
import { reap } from '../helpers/procs.js';

checkLeaks();

const targets = new URL('./fixtures/forward-targets.js', import.meta.url);
const target = { module: targets, export: 'returnInBatches' };

afterEach(() => mp.setSharingStrategy('file_descriptor'));

/** Sends `buffers` to a child that returns them `batch` at a time; the storages that come back, in order, and its warnings. */
async function roundTrip(buffers: mp.Tensor[], batch: number): Promise<{ back: mp.Tensor[]; warnings: { code?: string }[] }> {
  const q = new mp.Queue<mp.Tensor>();
  const back = new mp.Queue<mp.Tensor[] | { warnings: { code?: string }[] }>();
  const ctx = mp.spawn(target, { args: [q, back, buffers.length, batch], join: false });
  try {
    for (const b of buffers) await q.put(b);
    const got: mp.Tensor[] = [];
    while (got.length < buffers.length) got.push(...((await back.get()) as mp.Tensor[]));
    const { warnings } = (await back.get()) as { warnings: { code?: string }[] };
    assert.equal(await ctx.join(), true);
    return { back: got, warnings };
  } finally {
    await reap(ctx);
    q.close();
    back.close();
  }
}

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: 400 buffers returned in batches of 24 all arrive as their original storages (torch's buffer reuse)`, async () => {
    mp.setSharingStrategy(strategy);
    const buffers = Array.from({ length: 400 }, (_, k) => mp.full([1024], k, { shared: true }));
    const { back, warnings } = await roundTrip(buffers, 24);
    const same = back.filter((t, k) => t.storage === buffers[k]!.storage).length;
    assert.equal(same, 400, `${400 - same} came back as copies`);
    assert.deepEqual(
      back.map((t) => t.get(1023)),
      buffers.map((_, k) => k),
    );
    assert.deepEqual(warnings, []);
    for (const t of buffers) t.release();
  });
}

test('file_descriptor: a receiver that holds more than it keeps descriptors for sends copies, and says so once (ERR_TP_FORWARD_COPY)', async () => {
  // Above PACK_BYTES: a segment, and a descriptor, each (NOTE [Packed small storages]).
  const buffers = Array.from({ length: 10 }, (_, k) => mp.full([256], k, { shared: true }));
  process.env.TENSORPROC_KEEP_FDS = '4'; // the child's bound: it keeps 4 descriptors, and holds 10
  let result: Awaited<ReturnType<typeof roundTrip>>;
  try {
    result = await roundTrip(buffers, 10);
  } finally {
    delete process.env.TENSORPROC_KEEP_FDS;
  }
  const same = result.back.map((t, k) => t.storage === buffers[k]!.storage);
  // The four it received last kept their descriptors; the six before were closed.
  assert.deepEqual(same, [false, false, false, false, false, false, true, true, true, true]);
  assert.deepEqual(
    result.back.map((t) => t.get(0)),
    buffers.map((_, k) => k),
    'the copies hold the data',
  );
  assert.deepEqual(result.warnings, [{ code: 'ERR_TP_FORWARD_COPY' }], 'announced once');
  for (const t of [...buffers, ...result.back]) t.release();
});
