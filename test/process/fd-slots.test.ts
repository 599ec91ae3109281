// NOTE [Spawn arguments]: a tensor in spawn arguments reaches the child as the same shared
// memory. Under file_descriptor its memfd travels in a stdio slot; the child maps it and
// closes the descriptor at once, so it keeps none (and no slot is left open).
import { it } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const target = { module: new URL('./fixtures/targets.js', import.meta.url), export: 'addToTensor' };

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  for (const startMethod of ['spawn', 'thread'] as const) {
    it(`${strategy}, ${startMethod}: a tensor argument is the parent's memory`, { timeout: 60_000 }, async () => {
      mp.setSharingStrategy(strategy);
      const t = mp.full([2, 4], 1, { shared: true });
      try {
        // each child adds (its index + 1) to its own row: 2 rows, 2 children
        await mp.startProcesses(target, { args: [t, startMethod === 'spawn'], nprocs: 2, startMethod });
        assert.deepEqual(t.toArray(), [
          [2, 2, 2, 2],
          [3, 3, 3, 3],
        ]);
      } finally {
        t.release();
        mp.setSharingStrategy('file_descriptor');
      }
    });
  }
}
