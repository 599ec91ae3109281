// The package bundle carries a source map (NOTE [The package bundle]): under
// `node --enable-source-maps` a library error's stack names the TypeScript sources (through
// tsc's maps, which esbuild chains), and without the flag it names the bundle as before.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const repo = fileURLToPath(new URL('../../../', import.meta.url));
const bundleDir = join(repo, 'dist/bundle');
const program = fileURLToPath(new URL('./fixtures/bundle-errors.js', import.meta.url));
const CODES = ['ERR_TP_INVALID_STRATEGY', 'ERR_TP_INVALID_ARGUMENT'];
const SOURCES = ['src/sharing/strategy.ts', 'src/process/target.ts'];

function run(flags: string[]): { code: unknown; stack: string }[] {
  const r = spawnSync(process.execPath, [...flags, program], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '', 'no warnings');
  return JSON.parse(r.stdout) as { code: unknown; stack: string }[];
}

/** The first frame's location: [file, line, column]. */
function top(stack: string): [string, number, number] {
  const frame = stack.split('\n').find((l) => /^\s+at /.test(l));
  const m = frame && /\(?((?:file:\/\/)?\/[^\s()]+):(\d+):(\d+)\)?$/.exec(frame);
  assert.ok(m, `a frame with a location: ${stack}`);
  return [m[1]!.replace(/^file:\/\//, ''), Number(m[2]), Number(m[3])];
}

test('with --enable-source-maps, a library error names the TypeScript source line that throws', () => {
  run(['--enable-source-maps']).forEach(({ code, stack }, k) => {
    assert.equal(code, CODES[k]);
    const [file, line] = top(stack);
    assert.equal(relative(repo, file), SOURCES[k], stack);
    const text = readFileSync(file, 'utf8').split('\n')[line - 1] ?? '';
    assert.match(text, /\bthrow new \w+Error\(/, `${SOURCES[k]}:${line} is the throw (not a line off): ${text}`);
  });
});

test('without the flag, the stack names the bundle, as before', () => {
  run([]).forEach(({ code, stack }, k) => {
    assert.equal(code, CODES[k]);
    assert.equal(top(stack)[0], join(bundleDir, 'index.js'), stack);
    assert.doesNotMatch(stack, /\.ts:\d+/);
  });
});

test("every map under dist/bundle is a file's own and names only TypeScript sources that exist", () => {
  const maps: string[] = [];
  (function walk(dir: string) {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith('.map')) maps.push(p);
    }
  })(bundleDir);
  for (const f of ['index.js.map', 'programs/process-child.bundle.js.map']) assert.ok(maps.includes(join(bundleDir, f)), `${f} is built`);
  for (const map of maps) {
    const js = map.slice(0, -'.map'.length);
    assert.ok(
      readFileSync(js, 'utf8')
        .trimEnd()
        .endsWith(`//# sourceMappingURL=${js.slice(dirname(js).length + 1)}.map`),
      `${js} points at its map`,
    );
    const { sources, sourcesContent } = JSON.parse(readFileSync(map, 'utf8')) as { sources: string[]; sourcesContent?: unknown };
    assert.equal(sourcesContent, undefined, 'no sources inside (the package ships no src/)');
    assert.ok(sources.length > 0);
    for (const s of sources) {
      const path = join(dirname(map), s);
      // The library's sources, and the bundle's entry (a build input under scripts/).
      assert.match(relative(repo, path), /^(src\/.*|scripts\/bundle-entry)\.ts$/, `${relative(repo, map)}: ${s}`);
      assert.ok(existsSync(path), `${relative(repo, map)}: ${s} exists`);
    }
  }
});
