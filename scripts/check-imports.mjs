// `npm test`'s import check: the rules of .dependency-cruiser.cjs (floors, no cycles, type-only
// imports included, nothing under src/ importing the index), and one rule the graph alone
// cannot state: every module that registers a reduction (calls registerReduction) is reached
// from src/programs/reductions.ts, which a child loads before it decodes arguments that carry
// tensorproc objects (NOTE [Spawn arguments]); and one the type checker cannot: no file reads
// a TENSORPROC_* variable from process.env by its literal name, bypassing src/env.ts's table
// (envString/envNumber, or a name typed `satisfies EnvName`). Exits 1 on a violation.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../', import.meta.url));
const bin = fileURLToPath(new URL('../node_modules/.bin/depcruise', import.meta.url));
const run = (args) => {
  try {
    return { out: execFileSync(bin, args, { cwd: root, encoding: 'utf8' }), status: 0 };
  } catch (e) {
    return { out: `${e.stdout ?? ''}${e.stderr ?? ''}`, status: e.status ?? 1 };
  }
};

const rules = run(['src', '--config', '.dependency-cruiser.cjs', '--output-type', 'err']);
process.stdout.write(rules.out);
let failed = rules.status !== 0;

const graph = JSON.parse(run(['src', '--config', '.dependency-cruiser.cjs', '--output-type', 'json']).out);
const deps = new Map(graph.modules.map((m) => [m.source, m.dependencies.map((d) => d.resolved)]));
const reached = new Set();
const todo = ['src/programs/reductions.ts'];
while (todo.length) {
  const f = todo.pop();
  if (reached.has(f)) continue;
  reached.add(f);
  todo.push(...(deps.get(f) ?? []));
}
for (const f of deps.keys()) {
  if (!f.startsWith('src/') || reached.has(f)) continue;
  if (/\bregisterReduction\s*[<(]/.test(readFileSync(`${root}${f}`, 'utf8')) && !f.endsWith('/registry.ts')) {
    console.error(`  error reductions-loaded: ${f} registers a reduction that src/programs/reductions.ts does not load`);
    failed = true;
  }
}
for (const f of deps.keys()) {
  if (!f.startsWith('src/') || f === 'src/env.ts') continue;
  const text = readFileSync(`${root}${f}`, 'utf8');
  if (/process\.env(\.TENSORPROC_|\[\s*['"`]TENSORPROC_)/.test(text)) {
    console.error(`  error env-table: ${f} reads a TENSORPROC_* variable from process.env directly; read it through src/env.ts`);
    failed = true;
  }
}
if (failed) process.exit(1);
console.log('import check: floors, cycles, reductions and the environment table hold');
