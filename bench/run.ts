// `npm run bench`: every bench, one after another, each in its own process so that one
// bench's heap and caches do not colour the next. Each prints its own side-by-side table.
//
//   node dist/bench/run.js [name ...]      e.g. node dist/bench/run.js queue spawn
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const BENCHES = ['alloc', 'messages', 'spawn', 'queue'];
const chosen = process.argv.length > 2 ? process.argv.slice(2) : BENCHES;
let failed = 0;
for (const name of chosen) {
  const file = fileURLToPath(new URL(`./${name}.js`, import.meta.url));
  if (!existsSync(file)) {
    console.error(`no bench named ${name} (have: ${BENCHES.join(', ')})`);
    failed++;
    continue;
  }
  console.log(`\n## ${name}\n`);
  const r = spawnSync(process.execPath, ['--expose-gc', file], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exitCode = failed ? 1 : 0;
