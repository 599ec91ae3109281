// Checks of the option objects that spawn(), startProcesses() and Process take: a value of
// the wrong kind, or an option that does not exist, is an InvalidArgumentError before
// anything starts (Python refuses an unknown keyword argument the same way).
import { InvalidArgumentError } from '../errors.js';
import type { StartMethod } from './messages.js';

/** `options` as an object of known keys, with `join` and `daemon` booleans if given. */
export function checkOptions<T extends object>(options: unknown, known: readonly string[], what: string): T {
  if (options === undefined) return {} as T;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidArgumentError(`${what} options must be an object such as { ${known.join(', ')} } (got ${describe(options)}).`);
  }
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) {
      throw new InvalidArgumentError(`${what} has no option '${key}'. Its options: ${known.join(', ')}.`);
    }
  }
  const o = options as Record<string, unknown>;
  for (const key of ['join', 'daemon']) {
    if (o[key] !== undefined && typeof o[key] !== 'boolean') {
      throw new InvalidArgumentError(`${what} option ${key} must be true or false (got ${describe(o[key])}).`);
    }
  }
  return options as T;
}

export function checkStartMethod(startMethod: unknown): StartMethod {
  if (startMethod === undefined) return 'spawn';
  if (startMethod !== 'spawn' && startMethod !== 'thread') {
    throw new InvalidArgumentError(`startMethod must be 'spawn' or 'thread' (got ${describe(startMethod)}).`);
  }
  return startMethod;
}

export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (value === null || typeof value !== 'object') return String(value);
  return Array.isArray(value) ? 'an array' : `an object`;
}
