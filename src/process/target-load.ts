// Spawn targets, child side: import the module the parent named and find the function.
//
// NOTE [Loading the target in the child]
// torch pickles a function by name and the child unpickles it, importing its module; the
// parent never imports it. tensorproc does the same: the parent checks only the target's
// shape (target.ts) and starts its children at once (their pids are known before spawn()
// returns), and each child resolves, imports and checks the target before calling it. A
// program can therefore name its own entry module while its top-level code still runs
// (`await mp.spawn(...)` at top level, guarded by `if (mp.parentProcess() === null)`): the
// parent would wait for itself if it imported it. What cannot be loaded is a coded error of
// the child, sent in its ErrorMessage with `load: true`, and thrown by the parent's join()
// as that class (TargetNotFoundError, TargetNotFunctionError, TargetLoadError), with the
// child's `errorIndex` and `pid` (context.ts, process.ts). A child decodes its arguments
// after it has imported its target, whose module may register what they need to be rebuilt
// (a pool's worker channel), and decodes them even when that import failed, so that it
// holds, and lets go of at its exit, the references its tensor arguments carried (NOTE
// [Spawn arguments]).
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { TargetLoadError, TargetNotFoundError, TargetNotFunctionError } from '../errors.js';

export type Loader = (url: string) => Promise<Record<string, unknown>>;

/** The function the target names, or a TargetNotFoundError, TargetLoadError or TargetNotFunctionError. */
export async function loadTarget(
  module: string,
  exportName: string,
  base: string,
  load: Loader,
  index: number | null,
): Promise<(...args: unknown[]) => unknown> {
  const url = resolveModule(module, base);
  let ns: Record<string, unknown>;
  try {
    ns = await load(url);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' && !existsSync(fileURLToPath(url))) {
      throw new TargetNotFoundError(`The spawn target module ${url} does not exist. Check the path (relative paths resolve from ${base}).`);
    }
    const hint = code === 'ERR_UNKNOWN_FILE_EXTENSION' ? ' To run a .ts target, start the parent under a loader (node --import tsx).' : '';
    const message = (e instanceof Error ? e.message : String(e)).replace(/\.$/, '');
    throw new TargetLoadError(`The spawn target module ${url} failed to load: ${message}.${hint}`, { cause: e });
  }
  const fn = ns[exportName];
  if (typeof fn !== 'function') {
    const has = Object.keys(ns).filter((k) => typeof ns[k] === 'function');
    const called = index === null ? 'fn(...args)' : 'fn(i, ...args)';
    throw new TargetNotFunctionError(
      `The spawn target ${url} has ${exportName in ns ? `an export '${exportName}' of type ${typeof fn}` : `no export '${exportName}'`}; ` +
        `it must be a function called as ${called}. Functions it exports: ${has.length ? has.join(', ') : 'none'}.`,
    );
  }
  return fn as (...args: unknown[]) => unknown;
}

/** A file: URL as is; a package specifier resolved from `base`. */
export function resolveModule(specifier: string, base: string): string {
  if (specifier.startsWith('file:')) return specifier;
  try {
    return pathToFileURL(createRequire(join(base, 'noop.js')).resolve(specifier)).href;
  } catch {
    throw new TargetNotFoundError(
      `The spawn target package '${specifier}' cannot be resolved from ${base}. Install it, or pass an absolute path or file URL.`,
    );
  }
}
