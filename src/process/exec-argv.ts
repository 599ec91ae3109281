// What a child inherits of the parent's Node options, so that a parent run under a loader
// (node --import tsx parent.ts) starts children under the same loader and a .ts target works.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { pathToFileURL } from 'node:url';

// Options a child must not repeat: inspector ports would clash; -e/-p would run the parent's
// inline script instead of our bootstrap; --test would make the child a test runner.
const DROP = /^--(inspect|debug|test|eval|print|input-type|watch)/;
const DROP_WITH_VALUE = new Set(['-e', '--eval', '-p', '--print', '--inspect-port', '--debug-port']);

/** process.execArgv, less the options above. NODE_OPTIONS travels in the environment as is. */
export function childExecArgv(): string[] {
  const out: string[] = [];
  const argv = process.execArgv;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (DROP_WITH_VALUE.has(a)) {
      i++;
      continue;
    }
    if (DROP.test(a) || a === '-pe') continue;
    out.push(a);
  }
  return out;
}

interface TsxPackage {
  exports?: Record<string, { import?: string | { default?: string } } | undefined>;
}

/**
 * Worker threads inherit execArgv, but a loader may refuse to install itself in a worker
 * (tsx does on Node 20). If the parent runs under tsx, return a file: URL of tsx's
 * register() API for the thread bootstrap to call (programs/thread-child.ts), else null.
 */
export function loaderApiForThreads(): string | null {
  const argv = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    let value: string | undefined;
    if (a === '--import' || a === '--loader' || a === '--experimental-loader' || a === '--require' || a === '-r') value = argv[i + 1];
    else if (/^--(import|loader|experimental-loader|require)=/.test(a)) value = a.slice(a.indexOf('=') + 1);
    if (!value?.includes('tsx')) continue;
    const base = value.startsWith('file:') ? new URL(value).pathname : isAbsolute(value) ? value : join(process.cwd(), 'noop.js');
    try {
      // The ESM build: require.resolve() would give the CommonJS one, whose register() does
      // not work from a worker. package.json is read for its "import" condition.
      const pkgJson = createRequire(base).resolve('tsx/package.json');
      const api = (JSON.parse(readFileSync(pkgJson, 'utf8')) as TsxPackage).exports?.['./esm/api']?.import;
      const file = typeof api === 'string' ? api : api?.default;
      return file ? pathToFileURL(join(dirname(pkgJson), file)).href : null;
    } catch {
      return null;
    }
  }
  return null;
}
