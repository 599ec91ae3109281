// Runs every compiled *.test.js under dist/test (fixtures beside them are not tests), one file
// at a time: suites start real processes and check /dev/shm and descriptors for leaks, so
// they must not overlap. Extra arguments filter by substring: `node test/run.mjs queue`.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

const root = new URL('../dist/test/', import.meta.url).pathname;
const files = [];
(function walk(dir) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (name.endsWith('.test.js')) files.push(p);
  }
})(root);
const filters = process.argv.slice(2);
const chosen = filters.length ? files.filter((f) => filters.some((s) => f.includes(s))) : files;
if (chosen.length === 0) {
  console.error(`no test files matched ${filters.join(' ')}`);
  process.exit(1);
}
// A test that hangs fails after 3 minutes instead of holding CI until its own limit. Node 20
// applies --test-timeout to each file as a whole too, and the bench's file runs
// `bench --quick` (about 90 s alone, past 3 minutes on a loaded 2-core machine): such files
// run after the others, with a longer limit.
const LONG = ['/cli/bench.test.js'];
const long = chosen.filter((f) => LONG.some((s) => f.endsWith(s)));
const rest = chosen.filter((f) => !long.includes(f));
let status = 0;
for (const [group, ms] of [
  [rest, 180_000],
  [long, 600_000],
]) {
  if (group.length === 0) continue;
  const r = spawnSync(process.execPath, ['--expose-gc', '--test', '--test-concurrency=1', `--test-timeout=${ms}`, ...group], {
    stdio: 'inherit',
  });
  if (r.status !== 0) status = r.status ?? 1;
}
process.exit(status);
