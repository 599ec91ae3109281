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
  if (isEntry(url)) {
    // Importing the entry module from its own top-level await waits for itself for ever, and
    // each child would run its top-level code again (torch's `if __name__ == '__main__'`
    // problem, which ESM has no idiom for). Refused, with the fix, instead of a silent hang.
    throw new TargetIsEntryError(
      `The spawn target ${url} is the program's entry module. Put the function children run in a module of its own ` +
        `(e.g. ./worker.js) and spawn { module: new URL('./worker.js', import.meta.url), export: '${exportName}' }.`,
    );
  }
  let ns: Record<string, unknown>;
  try {
    ns = (await import(url)) as Record<string, unknown>;
  } catch (e) {
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
