// The package entry is a bundle (NOTE [The package bundle]): a program that imports
// 'tensorproc' holds one copy of the library, and so does every child it starts. Without the
// rewrite of each module's import.meta.url, a bundled parent's workers would load dist/src
// beside the bundle their targets import: their collate and transport would not know the
// targets' tensors (instanceof), and a spawned target would get a Tensor of another class.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

test("the package's name resolves to the bundle, beside dist/src", () => {
  assert.match(import.meta.resolve('tensorproc'), /\/dist\/bundle\/index\.js$/);
});

test('a program importing the package: DataLoader, Pool and spawn, process and thread children, one copy of the library in each', { timeout: 170_000 }, () => {
  const program = fileURLToPath(new URL('./fixtures/bundle-user.js', import.meta.url));
  const r = spawnSync(process.execPath, [program], { encoding: 'utf8', timeout: 150_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '', 'no warnings');
  const out = JSON.parse(r.stdout) as Record<string, unknown>;
  for (const m of ['spawn', 'thread']) {
    const batches = out[`loader ${m}`] as { tensor: boolean; shared: boolean; shape: number[]; i: number[]; first: number[][] }[];
    assert.equal(batches.length, 3, m);
    batches.forEach((b, k) => {
      // A worker running dist/src beside its dataset's bundle would not collate the dataset's
      // tensors into Tensors: this is the check that the workers run the bundle.
      assert.equal(b.tensor, true, `${m} batch ${k}: collated into Tensors of the package`);
      assert.equal(b.shared, true);
      assert.deepEqual(b.shape, [4, 2, 3]);
      assert.deepEqual(b.i, [4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3]);
      assert.deepEqual(b.first, [[4 * k, 4 * k, 4 * k], [4 * k, 4 * k, 4 * k]]);
    });
    assert.deepEqual(out[`pool ${m}`], [[1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]], m);
    assert.deepEqual(out[`spawn ${m}`], [3, 3, 3], m);
  }
  assert.deepEqual(out.exports, Object.keys(mp).sort(), 'the bundle exports the public API, nothing more');
});

test('the process bootstrap is in dist/bundle once, as its bundle: processBootstrap() takes it, there being no child-process.js beside it', () => {
  // (That the spawned children run it is the 'spawn' check above: a missing bootstrap fails them.)
  assert.ok(existsSync(new URL('../../bundle/process/child-process.bundle.js', import.meta.url)));
  assert.ok(!existsSync(new URL('../../bundle/process/child-process.js', import.meta.url)));
});
