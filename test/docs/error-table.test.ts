// docs/api.md's table of errors against src/errors.ts: every error class the package exports
// is in the reference, with its code.
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import assert from 'node:assert/strict';

const api = readFileSync(new URL('../../../docs/api.md', import.meta.url), 'utf8');
const source = readFileSync(new URL('../../../src/errors.ts', import.meta.url), 'utf8');
/** [class, code, base]: a `code: string` field is a base's default, which its subclasses replace. */
const classes = [...source.matchAll(/export class (\w+) extends \w+ \{\s+readonly code(: string)? = '(ERR_TP_\w+)'/g)].map(
  (m) => [m[1]!, m[3]!, m[2] !== undefined] as const,
);

test('src/errors.ts is read: its classes and codes are found', () => {
  assert.ok(classes.length > 40, `found ${classes.length}`);
});

test("every error class of src/errors.ts is in docs/api.md's table, with its code", () => {
  for (const [name, code, base] of classes) {
    assert.match(api, new RegExp(`\`mp\\.${name}\``), `${name} is not in docs/api.md`);
    if (!base) assert.match(api, new RegExp(`\\| \`${code}\` \\| \`mp\\.${name}\``), `${name}: its row does not give ${code}`);
  }
});
