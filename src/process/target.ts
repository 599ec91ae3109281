// Spawn targets: `{ module, export }` names the function a child runs, because a function
// value cannot cross a process boundary (torch pickles functions by qualified name, the same
// idea). The parent resolves the module to a file: URL once and imports it to check that the
// export is a function, so a bad target fails before any child starts, and every child
// loads exactly the file the parent checked.
//
// Resolution of `module`:
//   - a URL object or a string starting with `file:`: used as is;
//   - an absolute path: that file;
//   - a relative path (`./x.js`, `../x.js`): relative to process.cwd(), as `node ./x.js` does;
//   - anything else is a package specifier (`pkg`, `pkg/sub`), resolved from process.cwd().
// Absolute paths and `new URL('./x.js', import.meta.url)` are the recommended forms.
import { createRequire } from 'node:module';
import { existsSync, realpathSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { InvalidArgumentError, TargetIsEntryError, TargetLoadError, TargetNotFoundError, TargetNotFunctionError } from '../errors.js';
import { settledWithin } from './settled-within.js';

export interface Target {
  module: string | URL;
  export?: string;
}

export interface ResolvedTarget {
  url: string;
  exportName: string;
}

export async function resolveTarget(target: Target): Promise<ResolvedTarget> {
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
  const url = resolveModule(target.module);
  let ns: Record<string, unknown>;
  try {
    ns = isEntry(url) ? await importEntry(url, exportName) : ((await import(url)) as Record<string, unknown>);
  } catch (e) {
    if (e instanceof TargetIsEntryError) throw e;
    const code = (e as { code?: string }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' && !existsSync(fileURLToPath(url))) {
      throw new TargetNotFoundError(`The spawn target module ${url} does not exist. Check the path (relative paths resolve from ${process.cwd()}).`);
    }
    const hint = code === 'ERR_UNKNOWN_FILE_EXTENSION' ? ' To run a .ts target, start the parent under a loader (node --import tsx).' : '';
    throw new TargetLoadError(`The spawn target module ${url} failed to load: ${(e as Error).message}.${hint}`, { cause: e });
  }
  const fn = ns[exportName];
  if (typeof fn !== 'function') {
    const has = Object.keys(ns).filter((k) => typeof ns[k] === 'function');
    throw new TargetNotFunctionError(
      `The spawn target ${url} has ${exportName in ns ? `an export '${exportName}' of type ${typeof fn}` : `no export '${exportName}'`}; ` +
        `it must be a function called as fn(i, ...args). Functions it exports: ${has.length ? has.join(', ') : 'none'}.`,
    );
  }
  return { url, exportName };
}

// NOTE [The entry module as target]
// A program may name its own entry module as the target, guarding its main code as torch
// programs guard theirs with `if __name__ == '__main__'` (bench/queue.ts does). But if it
// calls spawn() from its top-level await, importing it waits for that evaluation, which waits
// for spawn(): a silent hang. An evaluated module imports at once (a resolve hook at most), so
// an entry module whose import has not settled after ENTRY_IMPORT_MS is taken to be in that
// state and refused with the fix.
const ENTRY_IMPORT_MS = 2000;

async function importEntry(url: string, exportName: string): Promise<Record<string, unknown>> {
  const ns = import(url) as Promise<Record<string, unknown>>;
  if (await settledWithin(ns, ENTRY_IMPORT_MS)) return ns;
  ns.catch(() => {}); // still evaluating: whatever it ends in, nobody waits for it now
  throw new TargetIsEntryError(
    `The spawn target ${url} is the program's entry module, and it is still running its top-level code: ` +
      `spawn() was awaited at its top level, and importing it would wait for itself. Move the function children run ` +
      `into a module of its own (spawn { module: new URL('./worker.js', import.meta.url), export: '${exportName}' }), ` +
      `or call the main code without awaiting it at top level, guarded so that children do not run it: ` +
      `if (process.argv[1] === fileURLToPath(import.meta.url)) main();`,
  );
}

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

function resolveModule(module: string | URL): string {
  if (module instanceof URL) return module.href;
  if (module.startsWith('file:')) return new URL(module).href;
  if (isAbsolute(module)) return pathToFileURL(module).href;
  if (module.startsWith('./') || module.startsWith('../') || module === '.' || module === '..') {
    return pathToFileURL(resolve(module)).href;
  }
  try {
    return pathToFileURL(createRequire(join(process.cwd(), 'noop.js')).resolve(module)).href;
  } catch {
    throw new TargetNotFoundError(`The spawn target package '${module}' cannot be resolved from ${process.cwd()}. Install it, or pass an absolute path or file URL.`);
  }
}
