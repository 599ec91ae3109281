// The walk every message gets before anything is serialized. It
//  - refuses what cannot travel, naming where it is (`batch.meta.fn`), before any state
//    is taken (no half-sent message, nothing to undo);
//  - finds the registered objects (tensors, queues…) and puts a marker where each one is
//    (see markers.ts), copying only the containers on the way to one: the user's value is
//    never modified, and a message with no registered object is not copied at all.
import { types } from 'node:util';
import { NotTransferableError } from '../errors.js';
import { reductionFor } from './registry.js';
import { marker } from './markers.js';
import { transportAddon } from './native.js';

export interface Walked {
  /** The value to serialize: the original, or a copy with markers in it. */
  readonly root: unknown;
  /** The registered objects found, in marker order (marker k stands for objects[k]). */
  readonly objects: object[];
}

const LEAVES: Function[] = [Date, RegExp, ArrayBuffer, Boolean, Number, String, BigInt, Error];
const REFUSED: [Function, string][] = [
  [Symbol, 'a Symbol object'],
  [WeakMap, 'a WeakMap'],
  [WeakSet, 'a WeakSet'],
  [WeakRef, 'a WeakRef'],
  [Promise, 'a Promise (await it first)'],
  [SharedArrayBuffer, 'a SharedArrayBuffer (use a shared tensor instead)'],
];
if (typeof FinalizationRegistry === 'function') REFUSED.push([FinalizationRegistry, 'a FinalizationRegistry']);

const PLAIN_KEY = /^[A-Za-z_$][\w$]*$/;

// Where the walk is, as a stack of steps from the root, turned into a path (`batch.meta.fn`)
// only when something is refused: building the string at every step was most of the walk.
const AT_INDEX = 0,
  AT_KEY = 1,
  AT_MAP_KEY = 2,
  AT_MAP_VALUE = 3,
  AT_SET = 4;

class Walker {
  readonly objects: object[] = [];
  readonly #index = new Map<object, number>();
  readonly #done = new Map<object, unknown>();
  readonly #active = new Set<object>();
  readonly #steps: number[] = [];
  readonly #at: unknown[] = [];
  /** A container was met again while being walked (a cycle). */
  cyclic = false;
  /** Inside an Error's cause, which V8 serializes itself: nothing registered may be there. */
  #inCause = 0;
  /** An Error's cause leads back to a container entered outside it, still being walked. */
  causeCycle = false;
  /** Containers entered inside an Error's cause. */
  readonly #enteredInCause = new Set<object>();
  dirty = false;

  constructor(
    readonly copyAll: boolean,
    readonly root: string,
  ) {}

  #path(): string {
    let p = this.root;
    for (let i = 0; i < this.#steps.length; i++) {
      const at = this.#at[i];
      switch (this.#steps[i]) {
        case AT_INDEX:
          p += `[${at as number}]`;
          break;
        case AT_KEY:
          p += PLAIN_KEY.test(at as string) ? `.${at as string}` : `[${JSON.stringify(at)}]`;
          break;
        case AT_MAP_KEY:
          p += `.keys()[${at as number}]`;
          break;
        case AT_MAP_VALUE:
          p += `.get(${describeKey(at)})`;
          break;
        default:
          p += `.values()[${at as number}]`;
      }
    }
    return p;
  }

  #fail(what: string): never {
    fail(this.#path(), what);
  }

  /** Visits a child at `at` (a refusal stops the walk, so the steps need no undoing then). */
  #child(step: number, at: unknown, value: unknown): unknown {
    this.#steps.push(step);
    this.#at.push(at);
    const out = this.visit(value);
    this.#steps.pop();
    this.#at.pop();
    return out;
  }

  visit(value: unknown): unknown {
    const type = typeof value;
    if (type !== 'object') {
      if (type === 'function') this.#fail('a function');
      if (type === 'symbol') this.#fail('a symbol');
      return value;
    }
    if (value === null) return value;
    const obj = value as object;
    const done = this.#done.get(obj);
    if (done !== undefined || this.#done.has(obj)) {
      // Met before, outside an error's cause, and copied then: the cause, which V8 writes as
      // it is, would lead to the original. In the first walk that means it holds something
      // registered; in the second (a cyclic message, every container copied) the two would
      // arrive as two objects.
      if (this.#inCause > 0 && done !== obj) {
        this.#fail(
          this.copyAll
            ? "an object that is also in an Error's cause, in a message with a cycle that holds tensors, queues or events (send the error apart)"
            : "an object holding a tensor, queue or event, inside an Error's cause (send it beside the error)",
        );
      }
      return done;
    }
    if (this.#active.has(obj)) {
      this.cyclic = true;
      // A cause that leads back to a container entered outside it: see prepare().
      if (this.#inCause > 0 && !this.#enteredInCause.has(obj)) this.causeCycle = true;
      return obj;
    }
    // Before reductionFor(), which reads obj.constructor: that would run a Proxy's traps.
    if (types.isProxy(obj)) this.#fail('a Proxy');
    if (reductionFor(obj) !== undefined) {
      if (this.#inCause > 0) this.#fail(`a ${obj.constructor.name} inside an Error's cause (send it beside the error)`);
      let k = this.#index.get(obj);
      if (k === undefined) {
        k = this.objects.length;
        this.objects.push(obj);
        this.#index.set(obj, k);
      }
      this.dirty = true;
      return marker(k);
    }
    if (ArrayBuffer.isView(obj)) {
      if (obj.buffer instanceof SharedArrayBuffer) this.#fail('a view of a SharedArrayBuffer (use a shared tensor instead)');
      return this.#leaf(obj);
    }
    // A plain object or array (most of what a message holds) is none of the types below.
    const proto = Object.getPrototypeOf(obj);
    if (proto !== Object.prototype && proto !== Array.prototype) {
      for (const [C, what] of REFUSED) if (obj instanceof C) this.#fail(what);
      for (const C of LEAVES) if (obj instanceof C) return this.#leaf(obj);
    }
    if (this.#inCause > 0 && this.copyAll) {
      // The second walk copies every container, but what a cause holds is written by V8 as it
      // is, and the first walk found nothing registered there: it stays itself.
      this.#done.set(obj, obj);
      return obj;
    }
    this.#active.add(obj);
    if (this.#inCause > 0) this.#enteredInCause.add(obj);
    const out = Array.isArray(obj)
      ? this.#array(obj)
      : obj instanceof Map
        ? this.#map(obj)
        : obj instanceof Set
          ? this.#set(obj)
          : this.#object(obj as Record<string, unknown>);
    this.#active.delete(obj);
    this.#done.set(obj, out);
    return out;
  }

  #leaf(obj: object): object {
    this.#done.set(obj, obj);
    if (obj instanceof Error && Object.hasOwn(obj, 'cause')) {
      // V8 serializes an error's cause itself, so the walk cannot swap what is in it: a
      // tensor there would arrive as a plain object. It is checked, and refused.
      this.#inCause++;
      this.#child(AT_KEY, 'cause', obj.cause);
      this.#inCause--;
    }
    return obj;
  }

  // Each container: children first; a copy is made at the first child that changed (or at
  // once in copyAll mode, so that a cycle back to it finds the copy: see prepare()).
  // A copy keeps what structured clone keeps of an array: its holes, and its own enumerable
  // properties that are not indices (`batch.label`), which are walked like an object's.
  #array(a: unknown[]): unknown[] {
    const n = a.length;
    let out: unknown[] | null = this.copyAll ? new Array(n) : null;
    if (out !== null) this.#done.set(a, out);
    // Set when the array turns out mostly holes (one element at 2**28, say): its elements as
    // the addon lists them, visited instead of every index up to its length. A dense array
    // never gets there, where listing its indices would cost more than counting through them.
    let indices: readonly (number | string)[] | null = null;
    let holes = 0;
    for (let i = 0; i < n; i++) {
      if (i in a) {
        out = this.#element(a, i, out, null);
      } else if (++holes > SPARSE_HOLES && holes > i / 2) {
        indices = transportAddon.arrayKeys(a, true);
        for (const k of indices) {
          if (typeof k !== 'number') break; // the other keys follow the indices
          if (k > i && k in a) out = this.#element(a, k, out, indices); // (a getter may have deleted it)
        }
        break;
      } // else a hole stays a hole
    }
    return this.#properties(a, namedKeys(a), out, () => copyElements(a, n, indices));
  }

  /** Visits element `i` of `a`; returns the copy (made now if this element changed), or null. */
  #element(a: unknown[], i: number, out: unknown[] | null, indices: readonly (number | string)[] | null): unknown[] | null {
    const v = a[i];
    const w = this.#child(AT_INDEX, i, v);
    if (out === null && w !== v) out = copyElements(a, i, indices);
    if (out !== null) out[i] = w;
    return out;
  }

  /**
   * Visits the properties `keys` of `src`, into `out` if it is a copy already; at the first
   * one that changed, the copy is made by `copy()` and the properties before it set on it.
   */
  #properties<T extends object>(src: T, keys: readonly string[], out: T | null, copy: () => T): T {
    const from = src as Record<string, unknown>;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const v = from[key];
      const w = this.#child(AT_KEY, key, v);
      if (out === null && w !== v) {
        out = copy();
        for (let j = 0; j < i; j++) (out as Record<string, unknown>)[keys[j]!] = from[keys[j]!];
      }
      if (out !== null) (out as Record<string, unknown>)[key] = w;
    }
    return out ?? src;
  }

  #map(m: Map<unknown, unknown>): Map<unknown, unknown> {
    let out: Map<unknown, unknown> | null = this.copyAll ? new Map() : null;
    if (out !== null) this.#done.set(m, out);
    let i = 0;
    for (const [k, v] of m) {
      const k2 = this.#child(AT_MAP_KEY, i, k);
      const v2 = this.#child(AT_MAP_VALUE, k, v);
      if (out === null && (k2 !== k || v2 !== v)) {
        out = new Map();
        let j = 0;
        for (const e of m) {
          if (j++ === i) break;
          out.set(e[0], e[1]); // entries before the first change are unchanged
        }
      }
      out?.set(k2, v2);
      i++;
    }
    return out ?? m;
  }

  #set(s: Set<unknown>): Set<unknown> {
    let out: Set<unknown> | null = this.copyAll ? new Set() : null;
    if (out !== null) this.#done.set(s, out);
    let i = 0;
    for (const v of s) {
      const v2 = this.#child(AT_SET, i, v);
      if (out === null && v2 !== v) {
        out = new Set();
        let j = 0;
        for (const e of s) {
          if (j++ === i) break;
          out.add(e);
        }
      }
      out?.add(v2);
      i++;
    }
    return out ?? s;
  }

  #object(o: Record<string, unknown>): object {
    // Structured clone keeps own enumerable string keys and nothing of the class; so does the copy.
    const fresh = (): Record<string, unknown> => Object.create(null) as Record<string, unknown>;
    const out = this.copyAll ? fresh() : null;
    if (out !== null) this.#done.set(o, out);
    return this.#properties(o, Object.keys(o), out, fresh);
  }
}

const NO_KEYS: readonly string[] = [];
/** Holes an array may have before the walk visits only its elements (see #array). */
const SPARSE_HOLES = 4096;
const INDEX_KEY = /^(?:0|[1-9]\d*)$/;

/**
 * An array's own enumerable keys that are not indices. Object.keys() lists every index first,
 * a string each: cheap for a short array; for a long one the addon lists the other keys alone.
 */
function namedKeys(a: unknown[]): readonly string[] {
  if (a.length > 16) return transportAddon.arrayKeys(a, false) as string[];
  const keys = Object.keys(a);
  if (keys.length === 0) return NO_KEYS;
  return keys.filter((k) => !INDEX_KEY.test(k) || Number(k) >= 2 ** 32 - 1); // 2**32 - 1 and up are not indices
}

/**
 * A plain array of `a`'s length holding its elements before index `upTo` (holes stay holes):
 * from `indices` (arrayKeys(a, true)) when `a` is mostly holes. Not a.slice(): that would
 * build a subclass through its constructor (Symbol.species).
 */
function copyElements(a: unknown[], upTo: number, indices: readonly (number | string)[] | null): unknown[] {
  const out = new Array(a.length);
  if (indices !== null) {
    for (const k of indices) {
      if (typeof k !== 'number' || k >= upTo) break;
      if (k in a) out[k] = a[k];
    }
  } else {
    for (let i = 0; i < upTo; i++) if (i in a) out[i] = a[i];
  }
  return out;
}

function describeKey(k: unknown): string {
  return typeof k === 'string' ? JSON.stringify(k) : typeof k === 'object' && k !== null ? '{…}' : String(k);
}

function fail(rawPath: string, what: string): never {
  const path = rawPath.startsWith('.') ? rawPath.slice(1) : rawPath;
  const where = path === '' ? 'The message' : path;
  throw new NotTransferableError(
    `${where} is ${what}, which cannot be sent to another process or thread. ` +
      'Send data (structured-clonable values and tensors) instead; to run code elsewhere, export it from a module and name it in a target.',
    path === '' ? '(message)' : path,
  );
}

/**
 * Checks `value` and swaps its registered objects for markers. `path` names the root in
 * errors ('' for a message, where paths start at its first key: `batch.meta.fn`).
 */
export function prepare(value: unknown, path = ''): Walked {
  const w = new Walker(false, path);
  const root = w.visit(value);
  // A message with registered objects is sent as a copy, but an Error is sent as it is (V8
  // writes it), so its cause would lead back to the originals: a structure the receiver's
  // V8 cannot read back. Refused, where the same message without them travels as it is.
  if (w.causeCycle && w.dirty)
    fail(path, 'an Error whose cause leads back into a message that holds tensors, queues or events (send the error, or its cause, apart)');
  if (!w.dirty) return { root: value, objects: w.objects };
  if (!w.cyclic) return { root, objects: w.objects };
  // A cycle may lead back to a container that was copied after the cycle was met, so that
  // the copy would hold the original (and its tensors unreplaced). Rare: walk again,
  // copying every container before its children.
  const all = new Walker(true, path);
  return { root: all.visit(value), objects: all.objects };
}
