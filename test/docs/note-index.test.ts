// docs/design.md's NOTE index is generated from the tree (scripts/note-index.mjs): a note
// added, renamed or moved to another file without regenerating it fails here.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));

it("docs/design.md's NOTE index lists every NOTE defined in the tree, in its file", () => {
  const r = spawnSync(process.execPath, ['scripts/note-index.mjs', '--check'], { cwd: root, encoding: 'utf8' });
  assert.equal(r.status, 0, `${r.stderr}${r.stdout}`);
});
