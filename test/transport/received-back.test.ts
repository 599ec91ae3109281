// Issue 9, point 2: a tensor that comes back to the process that sent it is the same storage,
// and releasing both (or disposing both, two `using` over one storage) is no error; a view
// released after its base, and a release repeated, are no-ops (API.md "Tensors").
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { checkLeaks } from '../helpers/leaks.js';
import { throwsCoded } from '../helpers/errors.js';
import { reap } from '../helpers/procs.js';
import * as mp from 'tensorproc';

checkLeaks();

afterEach(() => mp.setSharingStrategy('file_descriptor'));

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: q.put(t); r = await q.get(): r is t's storage, and r.release(); t.release() is no error`, async () => {
    mp.setSharingStrategy(strategy);
    const q = new mp.Queue<mp.Tensor>();
    try {
      const t = mp.full([16], 3);
      await q.put(t);
      const r = await q.get();
      assert.equal(r.storage, t.storage);
      r.release();
      t.release();
      r.release();
      throwsCoded(() => t.get(0), mp.ReleasedError, 'ERR_TP_RELEASED');
    } finally {
      q.close();
    }
  });

  test(`${strategy}: a tensor sent to a child and back: the same storage; two \`using\` over it, then its views, release once`, async () => {
    mp.setSharingStrategy(strategy);
    const q = new mp.Queue<unknown>();
    const back = new mp.Queue<mp.Tensor>();
    const ctx = mp.spawn(
      { module: new URL('./fixtures/echo-targets.js', import.meta.url), export: 'echo' },
      { args: [q, back], join: false },
    );
    try {
      const t = mp.full([4, 4], 5, { shared: true });
      const v = t.select(0, 2);
      await q.put(t);
      const r = await back.get();
      assert.equal(r.storage, t.storage);
      {
        using a = r;
        using b = t;
        assert.equal(a.get(3, 3), 5);
        b.set([0, 0], 6);
      }
      v.release();
      r[Symbol.dispose]();
      throwsCoded(() => v.get(0), mp.ReleasedError, 'ERR_TP_RELEASED');
      await q.put(null);
      assert.equal(await ctx.join(), true);
    } finally {
      await reap(ctx);
      q.close();
      back.close();
    }
  });
}
