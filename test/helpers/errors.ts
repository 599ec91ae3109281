// Every error a user can cause has a class and a stable code: tests check both at once.
import assert from 'node:assert/strict';

type ErrorClass = abstract new (...args: any[]) => Error;

/** A predicate for assert.throws / assert.rejects: an instance of `cls` with `code`. */
export function isCoded(cls: ErrorClass, code: string): (e: unknown) => true {
  return (e: unknown) => {
    assert.ok(e instanceof cls, `expected a ${cls.name}, got ${String(e)}`);
    assert.equal((e as { code?: string }).code, code);
    return true;
  };
}

/** Asserts that `fn` throws an instance of `cls` with `code`, and returns it. */
export function throwsCoded<E extends Error>(fn: () => unknown, cls: abstract new (...args: any[]) => E, code: string): E {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  isCoded(cls, code)(caught);
  return caught as E;
}
