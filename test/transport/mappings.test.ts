// NOTE [Mapping budget] (src/sharing/mappings.ts): a process that holds as many segments as the
// kernel lets it map gets a coded error, and takes nothing, instead of Node dying of "process
// out of memory" at its next allocation. The children here stay under TENSORPROC_MAX_MAPS.
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { reap } from '../helpers/procs.js';
import type { Refusal } from './fixtures/mapping-targets.js';

checkLeaks();

const targets = new URL('./fixtures/mapping-targets.js', import.meta.url);
const MAX_MAPS = 12_000; // the reserve is 4,096: about 7,000 segments fit beside node's own mappings

/** Starts a child with a limit of MAX_MAPS mappings. */
function startLimited(exportName: string, args: unknown[]): mp.ProcessContext {
  process.env.TENSORPROC_MAX_MAPS = String(MAX_MAPS);
  try {
    return mp.spawn({ module: targets, export: exportName }, { args, join: false });
  } finally {
    delete process.env.TENSORPROC_MAX_MAPS;
  }
}

afterEach(() => mp.setSharingStrategy('file_descriptor'));

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: a receiver at its mapping limit is refused with ERR_TP_TOO_MANY_MAPPINGS and the message waits for the next get`, async () => {
    mp.setSharingStrategy(strategy);
    const q = new mp.Queue<mp.Tensor | null>({ maxsize: 64 });
    const out = new mp.Queue<Refusal>();
    const ctx = startLimited('holdUntilRefused', [q, out]);
    try {
      let report: Refusal | null = null;
      const reported = out.get().then((r) => (report = r));
      for (let k = 0; report === null; k++) {
        const t = mp.full([256], k, { shared: true }); // above PACK_BYTES: one segment each (NOTE [Packed small storages])
        await Promise.race([q.put(t), reported]);
        t.release();
      }
      const r = report as unknown as Refusal;
      assert.equal(r.name, 'TooManyMappingsError');
      assert.equal(r.code, 'ERR_TP_TOO_MANY_MAPPINGS');
      assert.ok(r.held > 1000 && r.held < MAX_MAPS, `it held ${r.held}`);
      assert.equal(r.next, r.held, 'the refused message was not taken: it came with the next get');
      await q.put(null);
      assert.equal(await ctx.join(), true);
    } finally {
      await reap(ctx);
      q.close();
      out.close();
    }
  });
}

test('a process at its mapping limit cannot make another segment (ERR_TP_TOO_MANY_MAPPINGS) until it releases some', async () => {
  const out = new mp.Queue<Refusal & { segments: number }>();
  const ctx = startLimited('makeUntilRefused', [out]);
  try {
    const r = await out.get();
    assert.equal(r.name, 'TooManyMappingsError');
    assert.equal(r.code, 'ERR_TP_TOO_MANY_MAPPINGS');
    assert.ok(r.segments > 1000 && r.segments < MAX_MAPS, `it mapped ${r.segments}`);
    assert.equal(r.next, r.held - 100);
    assert.equal(await ctx.join(), true);
  } finally {
    await reap(ctx);
    out.close();
  }
});
