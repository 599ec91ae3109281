// A Barrier's action: a function (usable only where the barrier was made: a function cannot
// travel), or { module, export } naming one, imported where it runs (by the last party to
// arrive, in whichever process that is), as spawn targets are.
import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidArgumentError } from '../errors.js';

export interface ActionTarget {
  /** An absolute path or a file: URL (the party that runs it may have another working directory). */
  readonly module: string | URL;
  readonly export?: string;
}

export type BarrierAction = (() => unknown) | ActionTarget;

/** The action, checked, with its module as a URL; undefined for none. */
export function checkAction(a: unknown): BarrierAction | undefined {
  if (a === undefined || typeof a === 'function') return a as BarrierAction | undefined;
  const t = a as ActionTarget;
  if (
    typeof a === 'object' &&
    a !== null &&
    (typeof t.module === 'string' || t.module instanceof URL) &&
    (t.export === undefined || typeof t.export === 'string')
  ) {
    const m = t.module;
    if (m instanceof URL || m.startsWith('file:')) return { module: new URL(m), export: t.export ?? 'default' };
    if (isAbsolute(m)) return { module: pathToFileURL(m), export: t.export ?? 'default' };
  }
  throw new InvalidArgumentError(
    'A Barrier action must be a function, or { module, export? } with an absolute path or file: URL, e.g. ' +
      "{ module: new URL('./step.js', import.meta.url), export: 'onRound' }.",
  );
}

const imported = new Map<string, () => unknown>();

/** Runs the action (awaiting what it returns). */
export async function runAction(a: BarrierAction): Promise<void> {
  if (typeof a === 'function') {
    await a();
    return;
  }
  const url = a.module.toString();
  const name = a.export ?? 'default';
  const key = `${url}#${name}`;
  let fn = imported.get(key);
  if (fn === undefined) {
    const ns = (await import(url)) as Record<string, unknown>;
    const f = ns[name];
    if (typeof f !== 'function') throw new InvalidArgumentError(`The Barrier action ${url} has no function export '${name}'.`);
    fn = f as () => unknown;
    imported.set(key, fn);
  }
  await fn();
}
