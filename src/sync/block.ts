// The shared memory of synchronization objects and shared values.
//
// NOTE [Sync blocks]
// Each Lock, Semaphore, Condition, Barrier, Value or Array lives in a shared Storage of its
// own (a Value or Array also holds its default lock there), allocated like any shared tensor:
// the sharing strategy, the segment cache, the file_system manager, the receive-side cache
// (one storage received twice is one Storage) and the lifetime rules of NOTE [Segment
// lifetime] all apply unchanged, and an object travels as a reference to its storage plus the
// index of its first word. Its words are read through a SharedArrayBuffer over the segment's
// mapping (the storage's own buffer is a plain ArrayBuffer, which Atomics.wait refuses and the
// futex needs no more than an address of), which also keeps the segment from being reused
// while the object lives (NOTE [Moved buffers]: a live buffer holds its segment). The first
// word of each object is a tag of its kind: a received reference whose words are not of that
// kind is refused (FrameDecodeError) instead of being misread. A process has one object for
// one (storage, first word), so a lock received again and again is one Lock.
import { addon, type NativeMapping, type FutexResult } from '../native/index.js';
import { Storage } from '../tensor/index.js';
import { HEADER_BYTES, type Lease } from '../sharing/index.js';
import { registerReduction, type RebuildContext, type ReduceContext } from '../transport/index.js';
import { FrameDecodeError, ReleasedError } from '../errors.js';

const blocks = new WeakMap<Storage, SyncBlock>();

/** The block of an object whose block is all its own (a semaphore, a condition, a barrier). */
export const kBlock = Symbol('block');

export class SyncBlock {
  readonly storage: Storage;
  readonly words: Int32Array;
  readonly buffer: SharedArrayBuffer;
  readonly #mapping: NativeMapping;
  /** Where the block's words start in the mapping: its storage may be a piece of a slab (NOTE [Packed small storages]). */
  readonly #base: number;
  /** Objects of this process (thread) over this block, by their first word. */
  readonly #objects = new Map<number, WeakRef<object>>();

  private constructor(storage: Storage) {
    const lease = storage.backing as Lease | null;
    if (lease === null) throw new FrameDecodeError('A received synchronization object does not refer to shared memory.');
    this.storage = storage;
    this.#mapping = lease.segment.mapping;
    this.#base = HEADER_BYTES + lease.offset;
    this.buffer = addon.sharedBuffer(this.#mapping, this.#base, storage.nbytes);
    this.words = new Int32Array(this.buffer, 0, storage.nbytes >>> 2);
  }

  /** A new block of `nbytes` zeroed bytes in shared memory, of the current sharing strategy. */
  static create(nbytes: number): SyncBlock {
    const storage = Storage.allocate(Math.ceil(nbytes / 8) * 8, true);
    const block = new SyncBlock(storage);
    new Uint8Array(block.buffer).fill(0); // a recycled segment holds old bytes
    blocks.set(storage, block);
    return block;
  }

  /** The block of a received storage. */
  static of(storage: Storage): SyncBlock {
    let block = blocks.get(storage);
    if (block === undefined) {
      if (storage.isReleased()) throw new ReleasedError('A received synchronization object refers to a released storage.');
      block = new SyncBlock(storage);
      blocks.set(storage, block);
    }
    return block;
  }

  /** Blocks this thread while words[index] === expected, at most `ms` (futex, cross-process). */
  waitSync(index: number, expected: number, ms: number): FutexResult {
    return addon.futexWait(this.#mapping, this.#base + index * 4, expected, ms);
  }

  /** The same wait on a thread of its own: the event loop stays free. */
  waitAsync(index: number, expected: number, ms: number): Promise<FutexResult> {
    return addon.futexWaitAsync(this.#mapping, this.#base + index * 4, expected, ms);
  }

  wake(index: number, count = 2 ** 31 - 1): void {
    addon.futexWake(this.#mapping, this.#base + index * 4, count);
  }

  /** Records the object this process has over the words from `base`. */
  remember(base: number, obj: object): void {
    this.#objects.set(base, new WeakRef(obj));
  }

  known(base: number): object | undefined {
    return this.#objects.get(base)?.deref();
  }
}

/** How one kind of object travels: its block, first word and a few plain values. */
export interface SyncKind<T extends object> {
  readonly name: string;
  readonly type: Function & { readonly prototype: T };
  /** The tag in the first word of every object of this kind. */
  readonly tag: number;
  /** The words (from the first) the object spans. */
  readonly span: (block: SyncBlock, base: number) => number;
  /** The block and first word of an object, and what else must travel (plain values, or ctx.ref() of other objects). */
  reduce(obj: T, ctx: ReduceContext): { block: SyncBlock; base: number; extra: unknown[] };
  /** The object over these words, made in this process. */
  rebuild(block: SyncBlock, base: number, extra: unknown[], ctx: RebuildContext): T;
}

/** Registers the reduction of a sync kind: [storage entry, first word, ...extra]. */
export function registerSyncKind<T extends object>(kind: SyncKind<T>): void {
  registerReduction<T>({
    name: kind.name,
    type: kind.type,
    reduce(obj: T, ctx: ReduceContext) {
      const { block, base, extra } = kind.reduce(obj, ctx);
      return [ctx.ref(block.storage), base, ...extra];
    },
    rebuild(state: unknown, ctx: RebuildContext): T {
      if (!Array.isArray(state) || state.length < 2 || !Number.isSafeInteger(state[0]) || !Number.isSafeInteger(state[1])) {
        throw new FrameDecodeError(`A received ${kind.name} entry is malformed.`);
      }
      const storage = ctx.get(state[0] as number);
      if (!(storage instanceof Storage)) throw new FrameDecodeError(`A received ${kind.name} does not refer to a storage.`);
      const block = SyncBlock.of(storage);
      const base = state[1] as number;
      if (
        base < 0 ||
        base >= block.words.length ||
        Atomics.load(block.words, base) !== kind.tag ||
        base + kind.span(block, base) > block.words.length
      ) {
        throw new FrameDecodeError(`A received ${kind.name} does not point at one: the message is corrupt or not from tensorproc.`);
      }
      const existing = block.known(base);
      if (existing !== undefined) {
        if (!(existing instanceof kind.type)) throw new FrameDecodeError(`A received ${kind.name} points at another kind of object.`);
        return existing as T;
      }
      const obj = kind.rebuild(block, base, state.slice(2), ctx);
      block.remember(base, obj);
      return obj;
    },
  });
}
