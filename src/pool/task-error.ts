// A task's error as its caller gets it: the worker's error rebuilt with its name, message,
// stack and fields (as CPython re-raises the worker's exception), and, when it is one of
// tensorproc's own (a task module that does not exist, a result that cannot travel), an
// instance of that class, so that `instanceof` and `code` work as for errors thrown here.
import * as errors from '../errors.js';
import { rebuildError } from '../process/error-payload.js';
import type { SerializedError } from '../process/messages.js';

type ErrorClass = new (...args: unknown[]) => Error;

let byCode: Map<string, ErrorClass> | null = null;

/** tensorproc's error classes by their code, found by making one of each once. */
function classes(): Map<string, ErrorClass> {
  if (byCode !== null) return byCode;
  byCode = new Map();
  for (const value of Object.values(errors)) {
    if (typeof value !== 'function' || !(value.prototype instanceof Error)) continue;
    try {
      const probe = Reflect.construct(value, ['', {}]) as { code?: unknown };
      if (typeof probe.code === 'string' && !byCode.has(probe.code)) byCode.set(probe.code, value as ErrorClass);
    } catch {
      // a constructor that wants other arguments: not rebuilt by class
    }
  }
  return byCode;
}

export function rebuildTaskError(s: SerializedError): Error {
  const code = s.fields.code;
  const cls = typeof code === 'string' && code.startsWith('ERR_TP_') ? classes().get(code) : undefined;
  if (cls === undefined || s.name !== cls.name) return rebuildError(s);
  const e = Reflect.construct(cls, [s.message, {}]) as Error;
  Object.assign(e, s.fields);
  if (s.cause) Object.defineProperty(e, 'cause', { value: rebuildError(s.cause), writable: true, configurable: true, enumerable: false });
  e.stack = s.stack;
  return e;
}
