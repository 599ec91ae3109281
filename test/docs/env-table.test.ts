// docs/tensors.md's table of environment variables against src/env.ts, the table the code reads
// them through: the same names, and the same default wherever the code's is a number.
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ENV } from '../../src/env.js';

const page = readFileSync(new URL('../../../docs/tensors.md', import.meta.url), 'utf8');
/** The table's rows: `| \`NAME\` | default | meaning |`. */
const rows = new Map([...page.matchAll(/^\| `(TENSORPROC_[A-Z_]+)` \| ([^|]*) \|/gm)].map((m) => [m[1]!, m[2]!.trim()] as const));

test("docs/tensors.md lists exactly src/env.ts's variables", () => {
  assert.deepEqual([...rows.keys()].sort(), Object.keys(ENV).sort());
});

test('a numeric default in src/env.ts is the one docs/tensors.md gives', () => {
  for (const [name, v] of Object.entries(ENV)) {
    if (typeof v.default !== 'number') continue;
    const shown = rows.get(name) ?? '';
    const bytes = /^(\d+) MiB/.exec(shown);
    const value = bytes ? Number(bytes[1]) * 2 ** 20 : Number(/^\d+/.exec(shown)?.[0]);
    assert.equal(value, v.default, `${name}: the page says ${shown}`);
  }
});
