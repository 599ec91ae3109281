// Spawn targets, parent side: `{ module, export }` names the function a child runs, because
// a function value cannot cross a process boundary (torch pickles functions by qualified
// name, the same idea). The parent only checks the target's shape and turns `module` into
// what the child imports; the child imports and checks it (NOTE [Loading the target in the
// child], target-load.ts), so that children start at once and a program may name its own
// entry module, whose top-level code may still be running.
//
// Resolution of `module`:
//   - a URL object or a string starting with `file:`: used as is;
//   - an absolute path: that file;
//   - a relative path (`./x.js`, `../x.js`): relative to process.cwd(), as `node ./x.js` does;
//   - anything else is a package specifier (`pkg`, `pkg/sub`), resolved by the child from the
//     parent's process.cwd() at the start.
// Absolute paths and `new URL('./x.js', import.meta.url)` are the recommended forms.
import { realpathSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { InvalidArgumentError, TargetIsEntryError } from '../errors.js';
import { settledWithin } from './settled-within.js';
import { loadTarget, resolveModule, type Loader } from './target-load.js';

export interface Target {
  module: string | URL;
  export?: string;
}

export interface TargetSpec {
  /** A file: URL, or a package specifier (see above). */
  module: string;
  exportName: string;
  /** Where a package specifier resolves from. */
  base: string;
}

/** Checks the shape of `target` (synchronously: nothing is imported here). */
export function checkTarget(target: Target): TargetSpec {
  if (target === null || typeof target !== 'object' || !(typeof target.module === 'string' || target.module instanceof URL)) {
    throw new InvalidArgumentError(
      'A spawn target must be { module: string | URL, export?: string }, e.g. ' +
        "{ module: new URL('./worker.js', import.meta.url), export: 'run' }.",
    );
  }
  const exportName = target.export ?? 'default';
  if (typeof exportName !== 'string') {
    throw new InvalidArgumentError(`target.export must be a string (got ${typeof exportName}).`);
  }
  const { module } = target;
  if (module === '') throw new InvalidArgumentError('target.module is empty: give a path, a file: URL or a package name.');
  return { module: toUrlOrSpecifier(module), exportName, base: process.cwd() };
}

function toUrlOrSpecifier(module: string | URL): string {
  if (module instanceof URL) return module.href;
  if (module.startsWith('file:')) {
    try {
      return new URL(module).href;
    } catch {
      throw new InvalidArgumentError(`target.module ${JSON.stringify(module)} is not a valid file: URL.`);
    }
  }
  if (isAbsolute(module)) return pathToFileURL(module).href;
  if (module.startsWith('./') || module.startsWith('../') || module === '.' || module === '..') {
    return pathToFileURL(resolve(module)).href;
  }
  return module;
}

/**
 * Resolves, imports and checks `target` in this process, for function targets that run
 * here (a data loader's dataset factory, collate, workerInit): a relative path and a
 * package mean what they mean to spawn(), and a bad target is the same coded error.
 */
export async function resolveTarget(target: Target): Promise<{ url: string; exportName: string }> {
  const spec = checkTarget(target);
  const url = resolveModule(spec.module, spec.base);
  await loadTarget(url, spec.exportName, spec.base, (u) => (isEntry(u) ? importEntry(u, spec.exportName) : import(u)), null);
  return { url, exportName: spec.exportName };
}

// NOTE [The entry module imported in this process]
// spawn() never imports its target (its children do), but a function target run in this
// process is imported here. If it names the program's entry module and the program awaits
// at its top level whatever imports it, that import waits for the evaluation that waits
// for it: a silent hang. An evaluated module imports at once (a resolve hook at most), so an
// entry module whose import has not settled after ENTRY_IMPORT_MS is taken to be in that
// state and refused with the fix.
const ENTRY_IMPORT_MS = 2000;

const importEntry = (async (url: string, exportName: string) => {
  const ns = import(url) as Promise<Record<string, unknown>>;
  if (await settledWithin(ns, ENTRY_IMPORT_MS)) return ns;
  ns.catch(() => {}); // still evaluating: whatever it ends in, nobody waits for it now
  throw new TargetIsEntryError(
    `The target ${url} is the program's entry module, and it is still running its top-level code, which waits for ` +
      `this import: move the function into a module of its own ({ module: new URL('./data.js', import.meta.url), export: '${exportName}' }).`,
  );
}) satisfies (url: string, exportName: string) => ReturnType<Loader>;

/** Is `url` the file `node` was started with (process.argv[1]), symbolic links resolved? */
function isEntry(url: string): boolean {
  const main = process.argv[1];
  if (!main || !url.startsWith('file:')) return false;
  try {
    return realpathSync(fileURLToPath(url)) === realpathSync(main);
  } catch {
    return false;
  }
}
