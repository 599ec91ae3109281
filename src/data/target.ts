// Function targets of the data loader (the dataset factory, collate, workerInit): named by
// module and export like spawn targets, and resolved the same way (src/process/target.ts),
// so that a relative path means the same thing to the loader as to spawn().
import { InvalidArgumentError } from '../errors.js';
import { resolveTarget } from '../process/target.js';

export interface FunctionTarget {
  module: string | URL;
  export?: string;
}

// biome-ignore lint/suspicious/noExplicitAny: any parameters, so that every function type is assignable to it.
type Fn = (...args: any[]) => unknown;

export function isFunctionTarget(x: unknown): x is FunctionTarget {
  return x !== null && typeof x === 'object' && 'module' in x;
}

/** Checks the fields of a target without importing it. */
export function checkTarget(t: unknown, what: string): asserts t is FunctionTarget {
  const ok =
    isFunctionTarget(t) &&
    (typeof t.module === 'string' || t.module instanceof URL) &&
    (t.export === undefined || typeof t.export === 'string');
  if (!ok) {
    throw new InvalidArgumentError(
      `A ${what} must be { module: string | URL, export?: string }, e.g. { module: new URL('./data.js', import.meta.url), export: 'name' }.`,
    );
  }
}

/** The function a target names, imported in this process. */
export async function loadFunction(t: FunctionTarget, what: string): Promise<Fn> {
  checkTarget(t, what);
  const { url, exportName } = await resolveTarget(t);
  const ns = (await import(url)) as Record<string, unknown>;
  return ns[exportName] as Fn;
}

/** A function option (collate, workerInit): a function in this process, or a target to import. */
export async function loadOption(opt: Fn | FunctionTarget | undefined, what: string): Promise<Fn | undefined> {
  if (opt === undefined || typeof opt === 'function') return opt;
  return loadFunction(opt, what);
}
