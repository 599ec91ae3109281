// How a child's error travels: flattened in the child (`serializeError`), rebuilt in the
// parent (`rebuildError`) as an Error with the child's name, message, stack, own fields and
// cause chain. torch sends `traceback.format_exc()`; our `trace` is its counterpart: the
// stack, then "Caused by: " and each cause's stack, as Java and Python print chains.
import { inspect } from 'node:util';
import { TargetLoadError, TargetNotFoundError, TargetNotFunctionError } from '../errors.js';
import type { ErrorMessage, SerializedError } from './messages.js';

const MAX_CAUSES = 16; // a cause cycle must not loop forever

export function serializeError(thrown: unknown, depth = 0): SerializedError {
  if (!(thrown instanceof Error)) {
    const text = `Uncaught ${inspect(thrown)}`;
    return { name: 'Error', message: text, stack: text, fields: {} };
  }
  const fields: Record<string, unknown> = {};
  for (const key of Object.keys(thrown)) {
    if (key === 'cause') continue;
    fields[key] = cloneOrInspect((thrown as unknown as Record<string, unknown>)[key]);
  }
  const out: SerializedError = {
    name: String(thrown.name),
    message: String(thrown.message),
    stack: typeof thrown.stack === 'string' ? thrown.stack : `${thrown.name}: ${thrown.message}`,
    fields,
  };
  if ('cause' in thrown && thrown.cause !== undefined && depth < MAX_CAUSES) {
    out.cause = serializeError(thrown.cause, depth + 1);
  }
  return out;
}

export function formatTrace(e: SerializedError): string {
  let text = e.stack;
  for (let c = e.cause; c; c = c.cause) text += `\nCaused by: ${c.stack}`;
  return text;
}

function cloneOrInspect(value: unknown): unknown {
  try {
    return structuredClone(value);
  } catch {
    return inspect(value);
  }
}

// JavaScript's own error classes are rebuilt as themselves, so that `instanceof RangeError`
// holds in the parent as it did in the child; any other class is an Error with its name.
const BUILTIN_ERRORS: Record<string, ErrorConstructor> = { Error, RangeError, TypeError, SyntaxError, ReferenceError, EvalError, URIError };

/** The child's error as an Error in this process: same name, message, stack, fields and causes. */
export function rebuildError(s: SerializedError): Error {
  const Class = Object.hasOwn(BUILTIN_ERRORS, s.name) ? BUILTIN_ERRORS[s.name]! : Error;
  const e = new Class(s.message, s.cause ? { cause: rebuildError(s.cause) } : undefined);
  Object.defineProperty(e, 'name', { value: s.name, writable: true, configurable: true, enumerable: false });
  e.stack = s.stack;
  Object.assign(e, s.fields);
  return e;
}

/** The ErrorMessage that reports `e` to the parent; `load`: the child could not load its target. */
export function errorMessage(e: unknown, load = false): ErrorMessage {
  const error = serializeError(e);
  return { kind: 'error', load, error, trace: formatTrace(error) };
}

type TargetError = TargetNotFoundError | TargetNotFunctionError | TargetLoadError;
const TARGET_ERRORS: Record<string, new (message: string, options?: ErrorOptions) => TargetError> = {
  ERR_TP_TARGET_NOT_FOUND: TargetNotFoundError,
  ERR_TP_TARGET_NOT_FUNCTION: TargetNotFunctionError,
  ERR_TP_TARGET_LOAD: TargetLoadError,
};

/**
 * The error of a child that could not load its target (NOTE [Loading the target in the
 * child]), as its own class in this process, saying which child it was. `index` is null
 * for a Process.
 */
export function targetError(s: SerializedError, index: number | null, pid: number): TargetError {
  const Class = TARGET_ERRORS[String(s.fields.code)] ?? TargetLoadError;
  const who = index === null ? `The process (pid ${pid})` : `Process ${index} (pid ${pid})`;
  const e = new Class(`${who} could not load its target: ${s.message}`, s.cause ? { cause: rebuildError(s.cause) } : undefined);
  e.errorIndex = index;
  e.pid = pid;
  return e;
}
