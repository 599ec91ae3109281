// The examples of README.md and docs/*.md, run as a user runs them: scripts/doc-examples.mjs
// writes each ```ts block into test/docs/examples/<page>/, tsc has type-checked and compiled
// them with everything else, and each numbered one is a program run here in a process of its
// own, importing the package by name. A program must exit 0 by itself within the time below.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkLeaks, shmSegments } from '../helpers/leaks.js';

checkLeaks();

const root = fileURLToPath(new URL('./examples/', import.meta.url));
const PROGRAM = /^\d+\.js$/;
const LIMIT_MS = 30_000;

/** The compiled programs, page by page: `<n>.js` in number order (`// file:` modules are not run). */
function programs(): [page: string, files: string[]][] {
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .sort()
    .map((page): [string, string[]] => [
      page,
      readdirSync(join(root, page))
        .filter((f) => PROGRAM.test(f))
        .sort((a, b) => parseInt(a, 10) - parseInt(b, 10)),
    ])
    .filter(([, files]) => files.length > 0);
}

it('the pages have examples, and scripts/doc-examples.mjs wrote them before tsc', () => {
  const pages = programs().map(([page]) => page);
  for (const page of ['readme', 'tensors', 'processes', 'queues', 'sync', 'pool', 'data']) {
    assert.ok(pages.includes(page), `no examples of ${page} in ${root}: run node scripts/doc-examples.mjs, then tsc`);
  }
});

for (const [page, files] of programs()) {
  describe(page, () => {
    for (const file of files) {
      it(`${page}/${file} exits 0 by itself, leaving nothing in /dev/shm`, { timeout: LIMIT_MS + 10_000 }, () => {
        const before = new Set(shmSegments());
        const r = spawnSync(process.execPath, [join(root, page, file)], { encoding: 'utf8', timeout: LIMIT_MS, cwd: join(root, page) });
        const origin = `test/docs/examples/${page}/${file.replace(/\.js$/, '.ts')}`;
        assert.equal(r.error, undefined, `${origin}: ${String(r.error)}`);
        assert.equal(r.status, 0, `${origin} exited with ${r.status} (signal ${r.signal}):\n${r.stdout}\n${r.stderr}`);
        // The examples use the default manager: names a child left go within its graces, but a
        // clean exit releases everything it made, so nothing of it may be left at all.
        assert.deepEqual(
          shmSegments().filter((n) => !before.has(n)),
          [],
          `${origin} left segments in /dev/shm`,
        );
      });
    }
  });
}
