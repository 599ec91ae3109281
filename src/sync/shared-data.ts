// Value and Array: multiprocessing.Value / Array, elements of a dtype in shared memory with a
// lock. As in Python, each access takes the lock (an RLock of its own by default, so that
// `using _ = v.getLock().holdSync(); v.value += 1` works: the accesses inside re-enter it);
// `lock: false` gives raw memory, and an Lock or RLock of the caller's may be given instead.
// The default lock lives in the same block as the elements (NOTE [Sync blocks]): one segment.
// The elements are also a Tensor over that storage, without a copy (`.tensor`).
import { FrameDecodeError, IndexOutOfRangeError, InvalidArgumentError, InvalidCountError } from '../errors.js';
import { Tensor, type Scalar } from '../tensor/index.js';
import type { DTypeInfo } from '../tensor/dtype.js';
import { readScalar, writeScalar } from '../tensor/elements.js';
import { SyncBlock, registerSyncKind } from './block.js';
import { LOCK_WORDS, Lock, RLock } from './lock.js';
import { typecodeInfo, type Typecode } from './typecodes.js';

const VALUE_TAG = 0x56414c55; // 'VALU'
const ARRAY_TAG = 0x41525241; // 'ARRA'
/** Words before the elements: [tag, length, spare, spare]. */
const HEAD = 4;
const LENGTH = 1;
const MAX_LENGTH = 2 ** 31 - 1;

export interface SharedOptions {
  /** true (default): an RLock of its own; false: none; or a Lock/RLock to use. */
  readonly lock?: boolean | Lock | RLock;
}

type RawArray = { [i: number]: number | bigint; readonly length: number };

let placing: { block: SyncBlock; base: number; info: DTypeInfo; lock: Lock | RLock | null } | null = null;
const kData = Symbol('data');

/** What Value and Array share: the elements, their lock, and how they travel. */
abstract class SharedData {
  readonly #block: SyncBlock;
  readonly #base: number;
  readonly #info: DTypeInfo;
  readonly #raw: RawArray;
  readonly #lock: Lock | RLock | null;
  #tensor: Tensor | null = null;
  /** Made here (not received): the constructor writes the initial data. */
  protected readonly fresh: boolean;

  protected constructor(tag: number, type: unknown, length: number, opts: SharedOptions | undefined) {
    const received = placing;
    placing = null;
    this.fresh = received === null;
    if (received !== null) {
      ({ block: this.#block, base: this.#base, info: this.#info, lock: this.#lock } = received);
    } else {
      this.#info = typecodeInfo(type);
      const lockOpt = opts?.lock ?? true;
      if (typeof lockOpt !== 'boolean' && !(lockOpt instanceof Lock) && !(lockOpt instanceof RLock)) {
        throw new InvalidArgumentError(`lock must be true, false, an mp.Lock or an mp.RLock (got ${String(lockOpt)}).`);
      }
      this.#base = lockOpt === true ? LOCK_WORDS : 0;
      this.#block = SyncBlock.create((this.#base + HEAD) * 4 + length * this.#info.itemsize);
      Atomics.store(this.#block.words, this.#base + LENGTH, length);
      Atomics.store(this.#block.words, this.#base, tag);
      this.#lock = lockOpt === true ? RLock.placeAt(this.#block, 0, true) : lockOpt === false ? null : lockOpt;
    }
    const byteOffset = (this.#base + HEAD) * 4;
    this.#raw = new this.#info.array(
      this.#block.buffer,
      byteOffset,
      Atomics.load(this.#block.words, this.#base + LENGTH),
    ) as unknown as RawArray;
    this.#block.remember(this.#base, this);
  }

  get dtype(): DTypeInfo['name'] {
    return this.#info.name;
  }

  /** The lock each access takes (Python's get_lock()). */
  getLock(): Lock | RLock {
    if (this.#lock === null)
      throw new InvalidArgumentError("This was made with { lock: false }: it has no lock (Python's RawValue / RawArray).");
    return this.#lock;
  }

  /** The elements as a Tensor over the same shared memory (no copy). Do not release() it: that ends this object too. */
  get tensor(): Tensor {
    return (this.#tensor ??= this.makeTensor(this.#block, this.#info, ((this.#base + HEAD) * 4) / this.#info.itemsize));
  }

  protected abstract makeTensor(block: SyncBlock, info: DTypeInfo, offset: number): Tensor;

  protected get count(): number {
    return this.#raw.length;
  }

  protected read(i: number): Scalar {
    const lock = this.#lock;
    if (lock === null) return readScalar(this.#info, this.#raw[i]!);
    lock.acquireSync();
    try {
      return readScalar(this.#info, this.#raw[i]!);
    } finally {
      lock.release();
    }
  }

  protected write(i: number, v: unknown): void {
    const raw = writeScalar(this.#info, v);
    const lock = this.#lock;
    if (lock === null) {
      this.#raw[i] = raw;
      return;
    }
    lock.acquireSync();
    try {
      this.#raw[i] = raw;
    } finally {
      lock.release();
    }
  }

  /** Every element at once, under the lock once. */
  protected readAll(from: number, to: number): Scalar[] {
    const out: Scalar[] = [];
    const lock = this.#lock;
    lock?.acquireSync();
    try {
      for (let i = from; i < to; i++) out.push(readScalar(this.#info, this.#raw[i]!));
    } finally {
      lock?.release();
    }
    return out;
  }

  /** Writes `values` from index `from`, under the lock once. */
  protected writeAll(from: number, values: readonly unknown[]): void {
    const raws = values.map((v) => writeScalar(this.#info, v));
    const lock = this.#lock;
    lock?.acquireSync();
    try {
      for (let k = 0; k < raws.length; k++) this.#raw[from + k] = raws[k]!;
    } finally {
      lock?.release();
    }
  }

  get [kData](): { block: SyncBlock; base: number; info: DTypeInfo; lock: Lock | RLock | null } {
    return { block: this.#block, base: this.#base, info: this.#info, lock: this.#lock };
  }
}

/** multiprocessing.Value: one element. */
export class SharedValue extends SharedData {
  constructor(type: Typecode, initial: Scalar = 0, opts?: SharedOptions) {
    super(VALUE_TAG, type, 1, opts);
    if (this.fresh) this.write(0, initial);
  }

  get value(): Scalar {
    return this.read(0);
  }

  set value(v: Scalar) {
    this.write(0, v);
  }

  protected makeTensor(block: SyncBlock, info: DTypeInfo, offset: number): Tensor {
    return new Tensor(block.storage, info, [], [], offset);
  }
}

/** multiprocessing.Array: a fixed number of elements. */
export class SharedArray extends SharedData {
  constructor(type: Typecode, sizeOrData: number | Iterable<Scalar> | ArrayLike<Scalar>, opts?: SharedOptions) {
    const data = typeof sizeOrData === 'number' ? null : toList(sizeOrData);
    const length = data?.length ?? (sizeOrData as number);
    if (!Number.isSafeInteger(length) || length < 0 || length > MAX_LENGTH) {
      throw new InvalidCountError(`Array(type, size): size must be an integer from 0 to ${MAX_LENGTH} (got ${String(sizeOrData)}).`);
    }
    super(ARRAY_TAG, type, length, opts);
    if (data !== null && this.fresh) this.writeAll(0, data);
  }

  get length(): number {
    return this.count;
  }

  #index(i: number): number {
    const n = this.count;
    if (!Number.isInteger(i) || i < -n || i >= n)
      throw new IndexOutOfRangeError(`Index ${String(i)} is out of range for an Array of ${n} elements.`);
    return i < 0 ? i + n : i;
  }

  /** Element `i` (negative counts from the end, as in Python). */
  get(i: number): Scalar {
    return this.read(this.#index(i));
  }

  set(i: number, v: Scalar): void {
    this.write(this.#index(i), v);
  }

  /** A copy of elements [start, end) as a plain array (Python's arr[start:end]), under the lock once. */
  slice(start = 0, end = this.count): Scalar[] {
    const n = this.count;
    const clamp = (x: number): number => Math.min(n, Math.max(0, x < 0 ? x + n : x));
    return this.readAll(clamp(Math.trunc(start)), clamp(Math.trunc(end)));
  }

  toArray(): Scalar[] {
    return this.readAll(0, this.count);
  }

  /** Writes `values` from `start` (Python's arr[start:start + len] = values), under the lock once. */
  assign(values: Iterable<Scalar> | ArrayLike<Scalar>, start = 0): void {
    const list = toList(values);
    const from = start < 0 ? start + this.count : start;
    if (!Number.isInteger(from) || from < 0 || from + list.length > this.count) {
      throw new IndexOutOfRangeError(`${list.length} values from index ${start} do not fit an Array of ${this.count} elements.`);
    }
    this.writeAll(from, list);
  }

  [Symbol.iterator](): Iterator<Scalar> {
    return this.toArray()[Symbol.iterator]();
  }

  protected makeTensor(block: SyncBlock, info: DTypeInfo, offset: number): Tensor {
    return new Tensor(block.storage, info, [this.count], [1], offset);
  }
}

function toList(data: unknown): unknown[] {
  if (data !== null && typeof data === 'object') {
    if (Symbol.iterator in data) return Array.from(data as Iterable<unknown>);
    if (typeof (data as ArrayLike<unknown>).length === 'number') return Array.from(data as ArrayLike<unknown>);
  }
  throw new InvalidArgumentError(`Array(type, sizeOrData) takes a size or a list of values (got ${String(data)}).`);
}

for (const [type, tag, name] of [
  [SharedValue, VALUE_TAG, 'sync.value'],
  [SharedArray, ARRAY_TAG, 'sync.array'],
] as const) {
  registerSyncKind<SharedData>({
    name,
    type,
    tag,
    span: () => HEAD, // the elements are checked against the storage in rebuild, by their dtype's size
    reduce: (d, ctx) => {
      const { block, base, info, lock } = d[kData];
      return { block, base, extra: [info.name, lock === null ? -1 : ctx.ref(lock)] };
    },
    rebuild: (block, base, extra, ctx) => {
      const [dtype, lockRef] = extra;
      let info: DTypeInfo;
      try {
        info = typecodeInfo(dtype);
      } catch {
        throw new FrameDecodeError(`A received ${name} names dtype ${String(dtype)}.`);
      }
      const lock = lockRef === -1 ? null : Number.isSafeInteger(lockRef) ? ctx.get(lockRef as number) : undefined;
      if (!(lock === null || lock instanceof Lock || lock instanceof RLock))
        throw new FrameDecodeError(`A received ${name} entry is malformed.`);
      const bytes = (base + HEAD) * 4 + Atomics.load(block.words, base + LENGTH) * info.itemsize;
      if (bytes > block.storage.nbytes) throw new FrameDecodeError(`A received ${name} does not fit its storage.`);
      placing = { block, base, info, lock };
      return type === SharedValue ? new SharedValue('i') : new SharedArray('i', 0);
    },
  });
}
