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
import { ReleasedError } from '../errors.js';
import { collateAt, isPlainObject } from './collate.js';
import { releaseTensors } from './release.js';

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
      p.keys.forEach((k, j) => {
        out[k] = build(p.items[j]!);
      });
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

/**
 * Sample `j` as it was added, its released tensor leaves replaced by their rows of the batch
 * (the same bytes: NOTE [Releasing samples]), for the fallback to defaultCollate.
 */
function rebuild(p: Plan, x: unknown, j: number): unknown {
  switch (p.kind) {
    case 'tensor':
      return p.ctor === null ? p.out.select(0, j) : x; // a TypedArray leaf was not released
    case 'array':
      return (x as unknown[]).map((v, k) => rebuild(p.items[k]!, v, j));
    case 'map': {
      const m = x as Map<unknown, unknown>;
      return new Map(
        [...m].map(([k, v]) => {
          const at = p.keys.indexOf(k);
          return [k, at < 0 ? v : rebuild(p.items[at]!, v, j)];
        }),
      );
    }
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(x as Record<string, unknown>)) {
        const at = p.keys.indexOf(k);
        out[k] = at < 0 ? v : rebuild(p.items[at]!, v, j);
      }
      return out;
    }
    case 'other':
      return x;
  }
}

// NOTE [Releasing samples]
// With the DataLoader's `releaseSamples`, the samples getItem returns are the loader's: each
// sample's tensors are released as soon as it has been copied into its row of the batch, and
// a private tensor's release frees its memory at once (NOTE [Releasing private memory],
// storage.ts). The next sample's memory is then the memory just freed, still in the cache,
// instead of fresh lines the garbage collector's last burst left: on W4's dataset a worker's
// batch took about half the CPU (32 samples of 588 KiB made, filled and copied: 2.9 ms
// against 5.4, one process, medians of 200 batches). JavaScript cannot know that the dataset
// kept no reference, which torch's reference counts know, so the user says it. When the
// stream ends before the batch is complete (a sample of another structure, or a getItem that
// answers with a promise), defaultCollate runs on all the samples as without the option, the
// released ones rebuilt over their rows of the batch begun, which is let go after it.

/** defaultCollate over `n` samples given one at a time (NOTE [Collating as samples come]). */
export class CollateStream {
  readonly #samples: unknown[] = [];
  #plan: Plan | null = null;
  #broken = false;
  /** Samples 0..released-1 were copied into the plan and their tensors released. */
  #released = 0;

  constructor(
    readonly n: number,
    readonly releaseSamples = false,
  ) {}

  add(sample: unknown): void {
    const i = this.#samples.length;
    this.#samples.push(sample);
    if (this.#broken) return;
    // Found, and checked, before anything of it is copied or released.
    const owned = this.releaseSamples ? ownedTensors(sample, i) : null;
    if (i === 0) {
      this.#plan = plan(sample, this.n, 'batch');
    } else if (!add(this.#plan!, sample, i)) {
      this.#broken = true;
      if (!this.releaseSamples) this.#letGo();
      return;
    }
    if (owned !== null) {
      for (const t of owned) if (!t.storage.isReleased()) t.release(); // not after another view of its storage
      this.#released = i + 1;
    }
  }

  /** Lets go of the batch begun (a getItem threw). */
  abandon(): void {
    this.#letGo();
    this.#broken = true;
  }

  /** The batch: defaultCollate's, of all the samples added. */
  finish(): unknown {
    const p = this.#plan;
    if (p === null || this.#broken || this.#samples.length !== this.n) return this.collateWith(this.#samples);
    try {
      return build(p);
    } catch (e) {
      release(p); // a leaf defaultCollate refuses: its error, the tensors made so far let go
      throw e;
    }
  }

  /**
   * defaultCollate of `all` (the samples added first, then the rest), as if nothing had been
   * streamed; the batch begun is let go after, and with releaseSamples every sample's tensors.
   */
  collateWith(all: readonly unknown[]): unknown {
    const p = this.#plan;
    const samples = p === null || this.#released === 0 ? all : all.map((s, j) => (j < this.#released ? rebuild(p, s, j) : s));
    try {
      return collateAt(samples, 'batch');
    } finally {
      this.#letGo();
      if (this.releaseSamples) for (let j = this.#released; j < all.length; j++) releaseTensors(all[j]);
    }
  }

  #letGo(): void {
    if (this.#plan !== null) release(this.#plan);
    this.#plan = null;
  }
}

/**
 * The tensors of sample `i` of a releaseSamples loader, in the order releaseTensors() would
 * release them (the same walk), for release once the sample is copied. A tensor already
 * released is an error, thrown before anything is copied or released: the dataset gave it
 * twice, or keeps it.
 */
function ownedTensors(sample: unknown, i: number): Tensor[] {
  const tensors: Tensor[] = [];
  const seen = new Set<unknown>();
  const walk = (v: unknown): void => {
    if (v === null || typeof v !== 'object' || seen.has(v)) return;
    seen.add(v);
    if (v instanceof Tensor) {
      if (v.storage.isReleased()) {
        throw new ReleasedError(
          `Sample ${i} of the batch holds a tensor that was already released: with releaseSamples, every tensor getItem returns ` +
            'is released once collated, so a dataset must return fresh tensors (not one it keeps, returns twice, or a view of a tensor it keeps). Drop releaseSamples for such a dataset.',
        );
      }
      tensors.push(v);
    } else if (Array.isArray(v)) v.forEach(walk);
    else if (v instanceof Map) v.forEach(walk);
    else if (isPlainObject(v)) Object.values(v).forEach(walk);
  };
  walk(sample);
  return tensors;
}
