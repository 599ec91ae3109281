// The `timeout` option of every wait in tensorproc (get, put, poll, wait, acquire), checked
// once, and the error a receive that timed out rejects with.
import { InvalidArgumentError } from '../errors.js';
import { describeValue } from '../describe-value.js';

/** The timeout of an options object (`{ timeout }`), which must be an object if given. */
export function timeoutOption(options: unknown): number | null {
  if (options === undefined || options === null) return null;
  if (typeof options !== 'object') {
    throw new InvalidArgumentError(`options must be an object such as { timeout: 1000 } (got ${describeValue(options)}).`);
  }
  let timeout: unknown;
  try {
    timeout = (options as { timeout?: unknown }).timeout;
  } catch (e) {
    // A revoked Proxy (or a throwing getter): the caller's error, named as such.
    throw new InvalidArgumentError(
      `options could not be read (${(e as Error)?.message ?? String(e)}): pass a plain object such as { timeout: 1000 }.`,
      { cause: e },
    );
  }
  return checkTimeout(timeout);
}

/** Milliseconds from a user's `timeout` option: undefined/null/Infinity mean none. */
export function checkTimeout(timeout: unknown): number | null {
  if (timeout === undefined || timeout === null || timeout === Infinity) return null;
  if (typeof timeout !== 'number' || !(timeout >= 0)) {
    throw new InvalidArgumentError(`timeout must be a number of milliseconds >= 0, or undefined for none (got ${describeValue(timeout)}).`);
  }
  // setTimeout cannot wait longer than this; that long is "no timeout" in practice.
  return timeout > 2 ** 31 - 1 ? null : timeout;
}

/** The error of a receive that timed out: the caller's (a queue's QueueEmptyError), or a plain one. */
export function timedOut(timeout: number, onTimeout: ((timeout: number) => Error) | undefined): Error {
  return onTimeout?.(timeout) ?? new Error(`Nothing arrived within ${timeout} ms.`);
}
