// The package entry is a bundle (NOTE [The package bundle]): a program that imports
// 'tensorproc' holds one copy of the library, and so does every child it starts. Without the
// rewrite of each module's import.meta.url, a bundled parent's workers would load dist/src
// beside the bundle their targets import: their collate and transport would not know the
// targets' tensors (instanceof), and a spawned target would get a Tensor of another class.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { waitFor } from '../helpers/wait.js';

checkLeaks();

test("the package's name resolves to the bundle, beside dist/src", () => {
  assert.match(import.meta.resolve('tensorproc'), /\/dist\/bundle\/index\.js$/);
});

test('a program importing the package: DataLoader, Pool and spawn, process and thread children, one copy of the library in each', {
  timeout: 170_000,
}, () => {
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
      assert.deepEqual(b.first, [
        [4 * k, 4 * k, 4 * k],
        [4 * k, 4 * k, 4 * k],
      ]);
    });
    assert.deepEqual(
      out[`pool ${m}`],
      [
        [1, 1, 1, 1],
        [2, 2, 2, 2],
        [3, 3, 3, 3],
      ],
      m,
    );
    assert.deepEqual(out[`spawn ${m}`], [3, 3, 3], m);
  }
  assert.deepEqual(out.exports, Object.keys(mp).sort(), 'the bundle exports the public API, nothing more');
});

test('the process bootstrap is in dist/bundle once, as its bundle: processBootstrap() takes it, there being no programs/process-child.js beside it', () => {
  // (That the spawned children run it is the 'spawn' check above: a missing bootstrap fails them.)
  assert.ok(existsSync(new URL('../../bundle/programs/process-child.bundle.js', import.meta.url)));
  assert.ok(!existsSync(new URL('../../bundle/programs/process-child.js', import.meta.url)));
});

test("a bundled program's file_system manager starts, and leaves once idle", { timeout: 60_000 }, async () => {
  // The bundle once started its manager from dist/bundle/sharing/manager/server.js, which did
  // not exist: a bundled program ran with no manager (its names left in /dev/shm by a kill).
  // The holder waits for the manager's socket (it throws after 20 s without one).
  const dir = mkdtempSync(join(tmpdir(), 'tp-bundle-mgr-')); // mode 700, as the manager wants
  const sock = join(dir, 'manager-v1.sock');
  const program = fileURLToPath(new URL('./fixtures/bundle-fs-holder.js', import.meta.url));
  try {
    const r = spawnSync(process.execPath, [program], {
      env: { ...process.env, TENSORPROC_MANAGER_DIR: dir, TENSORPROC_MANAGER_IDLE_MS: '300' },
      encoding: 'utf8',
      timeout: 40_000,
    });
    assert.equal(r.status, 0, r.stderr);
    const [pid, value] = r.stdout.trim().split(' ');
    assert.equal(value, '7');
    assert.deepEqual(
      readdirSync('/dev/shm').filter((n) => n.startsWith(`tensorproc_${pid}_`)),
      [],
      'nothing of the holder left in /dev/shm',
    );
    await waitFor(() => !existsSync(sock), 10_000).catch(() => assert.fail('the manager did not leave once idle'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
