// NOTE [Collating as samples come]
// A batch of large samples (W4's: 32 of 600 KiB) is larger than the cache. Made first and
// stacked after, each sample has left the cache by the time collate copies it, so the copy
// reads it back from memory: measured, 10.9 ms of CPU a W4 batch to make and stack, against
// 8.1 when each sample is copied into the batch as soon as getItem returns it. So a fetch
// with the default collate (a map-style dataset whose getItem returns at once) feeds the
// samples to a CollateStream: the first sample fixes the batch's structure and allocates
// each tensor leaf's batch (shared, as defaultCollate's: NOTE [Collate into shared memory]);
// every later one is checked against it and its tensor leaves are copied in place; the other
// leaves (numbers, strings, ...) are batched by defaultCollate at the end. The result is
// exactly defaultCollate's. A sample that does not match (another kind, shape, dtype or
// length somewhere, a key missing) ends the stream: the batches made so far are released
// and defaultCollate runs on all the samples, so that errors are its own, word for word.
import { Tensor, empty, tensor, type TypedArray } from '../tensor/index.js';
import { collateAt, isPlainObject } from './collate.js';

type Plan =
  | { kind: 'tensor'; ctor: string | null; out: Tensor }
  | { kind: 'array'; items: Plan[] }
  | { kind: 'map'; keys: unknown[]; items: Plan[] }
  | { kind: 'object'; keys: string[]; items: Plan[] }
  | { kind: 'other'; values: unknown[]; path: string };

function asTensor(x: unknown): Tensor | null {
  if (x instanceof Tensor) return x;
  if (ArrayBuffer.isView(x) && !(x instanceof DataView)) return tensor(x as TypedArray);
  return null;
}

function plan(x: unknown, n: number, path: string): Plan {
  const t = asTensor(x);
  if (t !== null) {
    const out = empty([n, ...t.shape], { dtype: t.dtype, shared: true });
    out.select(0, 0).copy(t);
    return { kind: 'tensor', ctor: x instanceof Tensor ? null : (x as object).constructor.name, out };
  }
  if (Array.isArray(x)) return { kind: 'array', items: x.map((v, k) => plan(v, n, `${path}[${k}]`)) };
  if (x instanceof Map) {
    const keys = [...x.keys()];
    return { kind: 'map', keys, items: keys.map((k) => plan(x.get(k), n, `${path}.get(${JSON.stringify(k)})`)) };
  }
  if (isPlainObject(x)) {
    const keys = Object.keys(x);
    return { kind: 'object', keys, items: keys.map((k) => plan(x[k], n, `${path}.${k}`)) };
  }
  return { kind: 'other', values: [x], path };
}

/** Adds sample `i` under `p`; false when it does not have the plan's structure. */
function add(p: Plan, x: unknown, i: number): boolean {
  switch (p.kind) {
    case 'tensor': {
      const ok = p.ctor === null ? x instanceof Tensor : ArrayBuffer.isView(x) && (x as object).constructor.name === p.ctor;
      if (!ok) return false;
      const t = asTensor(x)!;
      const row = p.out.select(0, i);
      if (t.dtype !== row.dtype || t.shape.length !== row.shape.length || t.shape.some((d, k) => d !== row.shape[k])) return false;
      row.copy(t);
      return true;
    }
    case 'array':
      return Array.isArray(x) && x.length === p.items.length && p.items.every((q, k) => add(q, x[k], i));
    case 'map':
      return x instanceof Map && p.keys.every((k, j) => x.has(k) && add(p.items[j]!, x.get(k), i));
    case 'object':
      return isPlainObject(x) && p.keys.every((k, j) => Object.hasOwn(x, k) && add(p.items[j]!, x[k], i));
    case 'other':
      p.values.push(x);
      return true;
  }
}

function build(p: Plan): unknown {
  switch (p.kind) {
    case 'tensor':
      return p.out;
    case 'array':
      return p.items.map(build);
    case 'map':
      return new Map(p.keys.map((k, j) => [k, build(p.items[j]!)]));
    case 'object': {
      const out: Record<string, unknown> = {};
      p.keys.forEach((k, j) => { out[k] = build(p.items[j]!); });
      return out;
    }
    case 'other':
      return collateAt(p.values, p.path);
  }
}

function release(p: Plan): void {
  if (p.kind === 'tensor') p.out.release();
  else if (p.kind !== 'other') p.items.forEach(release);
}

/** defaultCollate over `n` samples given one at a time (NOTE [Collating as samples come]). */
export class CollateStream {
  readonly #samples: unknown[] = [];
  #plan: Plan | null = null;
  #broken = false;

  constructor(readonly n: number) {}

  add(sample: unknown): void {
    const i = this.#samples.length;
    this.#samples.push(sample);
    if (this.#broken) return;
    if (i === 0) {
      this.#plan = plan(sample, this.n, 'batch');
    } else if (!add(this.#plan!, sample, i)) {
      release(this.#plan!);
      this.#plan = null;
      this.#broken = true;
    }
  }

  /** Lets go of the batch begun (the caller collates otherwise). */
  abandon(): void {
    if (this.#plan !== null) release(this.#plan);
    this.#plan = null;
    this.#broken = true;
  }

  /** The batch: defaultCollate's, of all the samples added. */
  finish(): unknown {
    const p = this.#plan;
    if (p === null || this.#samples.length !== this.n) {
      if (p !== null) release(p);
      return collateAt(this.#samples, 'batch');
    }
    try {
      return build(p);
    } catch (e) {
      release(p); // a leaf defaultCollate refuses: its error, the tensors made so far let go
      throw e;
    }
  }
}
