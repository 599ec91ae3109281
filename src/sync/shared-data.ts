// Value and Array: multiprocessing.Value / Array, elements of a dtype in shared memory with a
// lock. As in Python, each access takes the lock (an RLock of its own by default, so that
// `using _ = v.getLock().holdSync(); v.value += 1` works: the accesses inside re-enter it);
// `lock: false` gives raw memory, and an Lock or RLock of the caller's may be given instead.
// The default lock lives in the same block as the elements (NOTE [Sync blocks]): one segment.
// The elements are also a Tensor over that storage, without a copy (`.tensor`).
import { FrameDecodeError, IndexOutOfRangeError, InvalidArgumentError, InvalidCountError } from '../errors.js';
import { describeValue } from '../describe-value.js';
import { Tensor, type Scalar } from '../tensor/index.js';
import type { DTypeInfo } from '../tensor/dtype.js';
import { readScalar, writeScalar } from '../tensor/elements.js';
import { SyncBlock, registerSyncKind } from './block.js';
import { LOCK_WORDS, Lock, RLock } from './lock.js';
import { typecodeInfo, type Typecode } from './typecodes.js';
import { readChar, writeChar } from './char.js';
import { claimName, releaseName, type NameClaim } from '../transport/names/index.js';

const VALUE_TAG = 0x56414c55; // 'VALU'
const ARRAY_TAG = 0x41525241; // 'ARRA'
/** Words before the elements: [tag, length, spare, spare]. */
const HEAD = 4;
const LENGTH = 1;
const MAX_LENGTH = 2 ** 31 - 1;

export interface SharedOptions {
  /** true (default): an RLock of its own; false: none; or a Lock/RLock to use. */
  readonly lock?: boolean | Lock | RLock;
  /** Reachable by this name from any process of this user: `mp.attach(name)` (NOTE [Named objects]). */
  readonly name?: string;
}

type RawArray = { [i: number]: number | bigint; readonly length: number };

interface Placed {
  block: SyncBlock;
  base: number;
  info: DTypeInfo;
  lock: Lock | RLock | null;
  /** Typecode 'c': bytes read and written as one-character strings (char.ts). */
  char: boolean;
}

let placing: Placed | null = null;
const kData = Symbol('data');

/** What Value and Array share: the elements, their lock, and how they travel. */
abstract class SharedData {
  readonly #block: SyncBlock;
  readonly #base: number;
  readonly #info: DTypeInfo;
  readonly #raw: RawArray;
  readonly #lock: Lock | RLock | null;
  readonly #char: boolean;
  #tensor: Tensor | null = null;
  /** Made here (not received): the constructor writes the initial data. */
  protected readonly fresh: boolean;

  protected constructor(tag: number, type: unknown, length: number, opts: SharedOptions | undefined) {
    const received = placing;
    placing = null;
    this.fresh = received === null;
    let claim: NameClaim | null = null;
    if (received !== null) {
      ({ block: this.#block, base: this.#base, info: this.#info, lock: this.#lock, char: this.#char } = received);
    } else {
      this.#info = typecodeInfo(type);
      this.#char = type === 'c';
      const lockOpt = opts?.lock ?? true;
      if (typeof lockOpt !== 'boolean' && !(lockOpt instanceof Lock) && !(lockOpt instanceof RLock)) {
        throw new InvalidArgumentError(`lock must be true, false, an mp.Lock or an mp.RLock (got ${String(lockOpt)}).`);
      }
      this.#base = lockOpt === true ? LOCK_WORDS : 0;
      claim = claimName(opts, tag === VALUE_TAG ? 'mp.Value()' : 'mp.Array()'); // NOTE [Named objects]
      try {
        this.#block = SyncBlock.create((this.#base + HEAD) * 4 + length * this.#info.itemsize);
      } catch (e) {
        claim?.close();
        throw e;
      }
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
    claim?.serve(this);
  }

  /**
   * Gives up this object's name, if this process made it with one (NOTE [Named objects]); the
   * memory itself stays usable here and everywhere it is held.
   */
  close(): void {
    releaseName(this);
  }

  /** Writes the initial data of a new object; a bad value gives its name up before the error goes. */
  protected initialize(fill: () => void): void {
    if (!this.fresh) return;
    try {
      fill();
    } catch (e) {
      releaseName(this);
      throw e;
    }
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

  /** Whether this holds bytes (typecode 'c'). */
  protected get isChar(): boolean {
    return this.#char;
  }

  #toValue(raw: number | bigint): Scalar | string {
    return this.#char ? readChar(raw) : readScalar(this.#info, raw);
  }

  #toRaw(v: unknown): number | bigint {
    return this.#char ? writeChar(v) : writeScalar(this.#info, v);
  }

  protected read(i: number): Scalar | string {
    const lock = this.#lock;
    if (lock === null) return this.#toValue(this.#raw[i]!);
    lock.acquireSync();
    try {
      return this.#toValue(this.#raw[i]!);
    } finally {
      lock.release();
    }
  }

  protected write(i: number, v: unknown): void {
    const raw = this.#toRaw(v);
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
  protected readAll(from: number, to: number): (Scalar | string)[] {
    const out: (Scalar | string)[] = [];
    const lock = this.#lock;
    lock?.acquireSync();
    try {
      for (let i = from; i < to; i++) out.push(this.#toValue(this.#raw[i]!));
    } finally {
      lock?.release();
    }
    return out;
  }

  /** Writes `values` from index `from`, under the lock once. */
  protected writeAll(from: number, values: readonly unknown[]): void {
    const raws = values.map((v) => this.#toRaw(v));
    const lock = this.#lock;
    lock?.acquireSync();
    try {
      for (let k = 0; k < raws.length; k++) this.#raw[from + k] = raws[k]!;
    } finally {
      lock?.release();
    }
  }

  get [kData](): Placed {
    return { block: this.#block, base: this.#base, info: this.#info, lock: this.#lock, char: this.#char };
  }
}

/**
 * multiprocessing.Value: one element. `V`: what it reads as, a Scalar, or a one-character
 * string for typecode 'c' (which is also written from a number 0-255: char.ts).
 */
export class SharedValue<V extends Scalar | string = Scalar> extends SharedData {
  constructor(type: Typecode, initial: Scalar | string = 0, opts?: SharedOptions) {
    super(VALUE_TAG, type, 1, opts);
    this.initialize(() => this.write(0, initial));
  }

  get value(): V {
    return this.read(0) as V;
  }

  set value(v: V | number) {
    this.write(0, v);
  }

  protected makeTensor(block: SyncBlock, info: DTypeInfo, offset: number): Tensor {
    return new Tensor(block.storage, info, [], [], offset);
  }
}

/**
 * multiprocessing.Array: a fixed number of elements. `V`: what an element reads as, a
 * Scalar, or a one-character string for typecode 'c' (then made from a string too:
 * Array('c', 'hello'), and with Python's `.value`).
 */
export class SharedArray<V extends Scalar | string = Scalar> extends SharedData {
  constructor(type: Typecode, sizeOrData: number | string | Iterable<Scalar | string> | ArrayLike<Scalar | string>, opts?: SharedOptions) {
    const data =
      typeof sizeOrData === 'number' ? null : type === 'c' && typeof sizeOrData === 'string' ? Array.from(sizeOrData) : toList(sizeOrData);
    const length = data?.length ?? (sizeOrData as number);
    if (!Number.isSafeInteger(length) || length < 0 || length > MAX_LENGTH) {
      throw new InvalidCountError(`Array(type, size): size must be an integer from 0 to ${MAX_LENGTH} (got ${String(sizeOrData)}).`);
    }
    super(ARRAY_TAG, type, length, opts);
    if (data !== null) this.initialize(() => this.writeAll(0, data));
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
  get(i: number): V {
    return this.read(this.#index(i)) as V;
  }

  set(i: number, v: V | number): void {
    this.write(this.#index(i), v);
  }

  /** A copy of elements [start, end) as a plain array (Python's arr[start:end]), under the lock once. */
  slice(start = 0, end = this.count): V[] {
    const n = this.count;
    const clamp = (x: number): number => Math.min(n, Math.max(0, x < 0 ? x + n : x));
    return this.readAll(clamp(Math.trunc(start)), clamp(Math.trunc(end))) as V[];
  }

  toArray(): V[] {
    return this.readAll(0, this.count) as V[];
  }

  /**
   * Typecode 'c' only, as Python's c_char array: the characters up to the first NUL (all of
   * them if there is none), under the lock once.
   */
  get value(): string {
    this.#checkChar();
    const chars = this.readAll(0, this.count) as string[];
    const end = chars.indexOf('\0');
    return (end < 0 ? chars : chars.slice(0, end)).join('');
  }

  /** Typecode 'c' only: writes `s` from the start, and a NUL after it when there is room (Python's `arr.value = b'...'`). */
  set value(s: string) {
    this.#checkChar();
    if (typeof s !== 'string') throw new InvalidArgumentError(`The value of a 'c' Array is a string (got ${describeValue(s)}).`);
    if (s.length > this.count)
      throw new IndexOutOfRangeError(`A string of ${s.length} characters does not fit a 'c' Array of ${this.count}.`);
    this.writeAll(0, s.length < this.count ? [...s, '\0'] : Array.from(s));
  }

  #checkChar(): void {
    if (!this.isChar)
      throw new InvalidArgumentError(
        `Only an Array of typecode 'c' has .value (a string); this one holds ${this.dtype}: use get(i) or toArray().`,
      );
  }

  /** Writes `values` from `start` (Python's arr[start:start + len] = values), under the lock once. */
  assign(values: Iterable<V | number> | ArrayLike<V | number>, start = 0): void {
    const list = toList(values);
    const from = start < 0 ? start + this.count : start;
    if (!Number.isInteger(from) || from < 0 || from + list.length > this.count) {
      throw new IndexOutOfRangeError(`${list.length} values from index ${start} do not fit an Array of ${this.count} elements.`);
    }
    this.writeAll(from, list);
  }

  [Symbol.iterator](): Iterator<V> {
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
      const { block, base, info, lock, char } = d[kData];
      return { block, base, extra: [char ? 'c' : info.name, lock === null ? -1 : ctx.ref(lock)] };
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
      placing = { block, base, info, lock, char: dtype === 'c' };
      return type === SharedValue ? new SharedValue('i') : new SharedArray('i', 0);
    },
  });
}
