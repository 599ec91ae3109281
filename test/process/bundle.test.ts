// NOTE [The process child's bundle]: process children run the bundled bootstrap when it was
// built after the last compile, and the plain one otherwise; both decode tensorproc
// arguments, name themselves and refuse a start while their target loads.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { statSync, utimesSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { checkLeaks } from '../helpers/leaks.js';
import { fixture } from '../helpers/child.js';

checkLeaks();

const repo = fileURLToPath(new URL('../../../', import.meta.url));
const plain = fileURLToPath(new URL('../../src/programs/process-child.js', import.meta.url));
const bundle = fileURLToPath(new URL('../../src/programs/process-child.bundle.js', import.meta.url));

function run(): { bootstrap: string; child: { argv1: string; name: string; parent: string }; refused: { code: string; cause: string } } {
  const out = execFileSync(process.execPath, [fixture(import.meta.url, 'which-bootstrap.js')], { encoding: 'utf8', timeout: 60_000 });
  return JSON.parse(out.trim().split('\n').pop()!);
}

function assertWorks(r: ReturnType<typeof run>, file: string): void {
  assert.equal(r.bootstrap, pathToFileURL(file).href);
  assert.equal(r.child.argv1, file, 'the child ran that bootstrap');
  assert.match(r.child.name, /^Process-\d+$/);
  assert.equal(r.child.parent, 'MainProcess');
  assert.deepEqual(r.refused, { code: 'ERR_TP_TARGET_LOAD', cause: 'ERR_TP_SPAWN_IN_BOOTSTRAP' });
}

it('a fresh bundle is what process children run; one older than the compile is not', { timeout: 120_000 }, () => {
  execFileSync(process.execPath, ['scripts/bundle-child.mjs'], { cwd: repo, stdio: 'inherit' });
  assertWorks(run(), bundle);
  const { atime, mtime } = statSync(bundle);
  try {
    // As after a `tsc` alone: the bundle predates programs/process-child.js.
    utimesSync(bundle, atime, new Date(statSync(plain).mtimeMs - 60_000));
    assertWorks(run(), plain);
  } finally {
    utimesSync(bundle, atime, mtime);
  }
});
