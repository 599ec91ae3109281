// Storage: the bytes that one or more tensors (views) look at. Knows nothing of processes;
// shared memory comes from an allocator that src/sharing installs.
//
// NOTE [Shared allocation]
// src/tensor sits left of src/sharing in the layer order (DESIGN.md), yet `shared: true` and
// `shareMemory()` must allocate shared segments. src/sharing/allocator.ts installs the
// allocator with setSharedAllocator() when it is first imported, which src/index.ts does.
// A SharedBacking is one lease on a segment (all of it, or a piece of a slab shared with other
// small storages: NOTE [Packed small storages]): `buffer` covers exactly the storage's bytes, and
// `release(escaped)` gives the segment back to the per-process cache. If the buffer ever
// reached user code (`t.data`, `storage.buffer`), it is detached first: every view the user
// kept becomes empty, so a stale view can never read a recycled segment. A buffer that only
// tensorproc's own methods touched cannot be seen by anyone after release (every tensor
// method checks the storage first), so it is kept and reused with the segment: a recycled
// allocation then costs no native call at all.
import { constants as bufferConstants } from 'node:buffer';
import { CudaHostAccessError, InvalidShapeError, ReleasedError } from '../errors.js';
import { addon } from '../native/index.js';
import { type Device, type DeviceBacking, deviceOps } from './device.js';

// NOTE [Uninitialized private memory]
// `new ArrayBuffer(n)` is calloc: glibc zeroes every chunk it hands out from a heap that
// was used before, which is what a process making one sample after another has (a
// DataLoader worker's heap is kept, NOTE [Worker malloc]), and the zeroing costs as much as
// the write the caller is about to do: W4's 32 samples of 3x224x224 float32, made with
// empty() then fill(), took 8-9 ms a batch (median of 60, copy into the batch included)
// against 4.4-5.4 with memory left as it was. torch.empty is malloc for the same reason.
// So empty() and clone(), whose every byte the caller or the copy writes next, take
// Buffer.allocUnsafeSlow's memory (malloc, not from Buffer's pool: the ArrayBuffer is the
// storage's alone); zeros() and everything else keep calloc. Past Buffer's size limit
// (4 GiB on Node 20) it is calloc again.
const MAX_LENGTH = bufferConstants.MAX_LENGTH;

export interface SharedBacking {
  readonly buffer: ArrayBuffer;
  /** Opaque to this layer: the segment, for src/sharing's reduce/rebuild. */
  readonly segment: object;
  release(escaped: boolean): void;
  /** True when the memory is known to hold zeros (a freshly made segment). */
  readonly zeroed?: boolean;
}

export type SharedAllocator = (nbytes: number) => SharedBacking;

let sharedAllocator: SharedAllocator | null = null;

export function setSharedAllocator(fn: SharedAllocator): void {
  sharedAllocator = fn;
}

function allocateShared(nbytes: number): SharedBacking {
  if (sharedAllocator === null) {
    throw new Error('tensorproc: shared memory is not available: import tensorproc from its package entry point.');
  }
  return sharedAllocator(nbytes);
}

// NOTE [Device storages]
// A CUDA storage has no host buffer: its bytes are device memory that src/cuda leases from a
// chunk (DeviceBacking). Every host access (`buffer`, `internalBuffer`, hence data, get, set,
// toArray) is CudaHostAccessError naming `await t.to('cpu')`; views, release() and travel
// work as for a shared CPU storage. The collector gives a forgotten one back (the finalizer
// below), as it does a shared lease (NOTE [Lease buffers and the finalizer]).
const NO_BYTES = new ArrayBuffer(0);
const deviceFinalizer = new FinalizationRegistry<DeviceBacking>((b) => {
  try {
    b.release();
  } catch {
    // a finalizer must not throw; the device memory stays with its chunk
  }
});

export class Storage {
  readonly nbytes: number;
  #device: DeviceBacking | null = null;
  #buffer: ArrayBufferLike | null;
  #byteOffset: number;
  #backing: SharedBacking | null;
  #escaped = false;
  /** Private memory this storage allocated itself: release() frees it (NOTE [Releasing private memory]). */
  #ownsBuffer = false;

  protected constructor(buffer: ArrayBufferLike, byteOffset: number, nbytes: number, backing: SharedBacking | null) {
    this.#buffer = buffer;
    this.#byteOffset = byteOffset;
    this.nbytes = nbytes;
    this.#backing = backing;
  }

  /**
   * A new storage in shared memory when `shared` (then, if recycled, holding old bytes), else
   * process-private: zero-filled, or with `zero: false` holding whatever the memory held
   * (NOTE [Uninitialized private memory]).
   */
  static allocate(nbytes: number, shared: boolean, zero = true): Storage {
    if (shared) {
      const b = allocateShared(nbytes);
      return new Storage(b.buffer, 0, nbytes, b);
    }
    let buffer: ArrayBuffer;
    try {
      buffer = !zero && nbytes <= MAX_LENGTH ? (Buffer.allocUnsafeSlow(nbytes).buffer as ArrayBuffer) : new ArrayBuffer(nbytes);
    } catch (e) {
      throw new InvalidShapeError(`Cannot allocate ${nbytes} bytes of memory (${(e as Error).message}). Use a smaller shape.`);
    }
    const storage = new Storage(buffer, 0, nbytes, null);
    storage.#ownsBuffer = true;
    return storage;
  }

  /** A new storage of `nbytes` on CUDA device `index` (contents unspecified). */
  static onDevice(index: number, nbytes: number): Storage {
    return Storage.fromDevice(deviceOps().allocate(index, nbytes), nbytes);
  }

  /** Wraps a lease on device memory (src/cuda, when a CUDA storage is made or arrives). */
  static fromDevice(backing: DeviceBacking, nbytes: number): Storage {
    const s = new Storage(NO_BYTES, 0, nbytes, null);
    s.#device = backing;
    deviceFinalizer.register(s, backing, s);
    return s;
  }

  /** 'cpu', or the CUDA device this storage's bytes are on. */
  get device(): Device {
    return this.#device === null ? 'cpu' : this.#device.device;
  }

  /**
   * A CPU storage of this class itself: what the send path's frames carry as a segment (moved
   * into one first if private). Not a mapped file's (FileStorage, NOTE [File storages]) nor a
   * CUDA storage (NOTE [CUDA chunk lifetime]), which travel by their own reductions. One check
   * for both encoders (frame-encode.ts, plain-encode.ts), on the hot path of every send.
   */
  isPlainCpu(): boolean {
    return this.#device === null && this.constructor === Storage;
  }

  /** The device lease behind a CUDA storage, or null for a CPU one. Throws ERR_TP_RELEASED after release(). */
  get deviceBacking(): DeviceBacking | null {
    if (this.#buffer === null) throw released();
    return this.#device;
  }

  /** Wraps existing memory without a copy. */
  static wrap(buffer: ArrayBufferLike, byteOffset: number, nbytes: number): Storage {
    return new Storage(buffer, byteOffset, nbytes, null);
  }

  /** Wraps a lease on a shared segment (used by src/sharing when a storage arrives). */
  static fromBacking(backing: SharedBacking, nbytes: number): Storage {
    return new Storage(backing.buffer, 0, nbytes, backing);
  }

  /** The buffer and offset of the bytes; throws ERR_TP_RELEASED after release(). */
  get buffer(): ArrayBufferLike {
    if (this.#buffer === null) throw released();
    if (this.#device !== null) throw hostAccess(this.#device.device);
    this.#escaped = true;
    return this.#buffer;
  }

  /**
   * The buffer for tensorproc's own element access, which never hands it out: unlike
   * `buffer`, it does not mark the buffer as seen by user code (see NOTE [Shared allocation]).
   */
  get internalBuffer(): ArrayBufferLike {
    if (this.#buffer === null) throw released();
    if (this.#device !== null) throw hostAccess(this.#device.device);
    return this.#buffer;
  }
  get byteOffset(): number {
    return this.#byteOffset;
  }

  /** The shared segment lease behind this storage, or null when it is process-private. */
  get backing(): SharedBacking | null {
    return this.#backing;
  }

  isShared(): boolean {
    // As torch's is_shared(): device memory is shareable as it is.
    return this.#backing !== null || this.#device !== null;
  }

  /** True when writing methods must throw (a file mapped read-only: src/sharing/file-storage.ts). */
  get readOnly(): boolean {
    return false;
  }

  /**
   * Throws when the bytes are gone although the storage was not released (a mapped file that
   * shrank: NOTE [File mappings and SIGBUS]); tensor methods call it around their accesses.
   */
  checkIntact(): void {}

  isReleased(): boolean {
    return this.#buffer === null;
  }

  /** Throws ERR_TP_RELEASED after release(). */
  assertUsable(): void {
    if (this.#buffer === null) throw released();
  }

  /** torch share_memory_(): moves the bytes into shared memory (one copy). */
  shareMemory(): this {
    if (this.#backing === null && this.#device === null) this.#moveToShared();
    return this;
  }

  /**
   * Moves shared bytes into a new segment of this process (one copy). src/sharing uses it
   * for a received storage that must travel on but whose descriptor was closed.
   */
  rebase(): this {
    const old = this.#backing;
    const escaped = this.#escaped;
    this.#moveToShared();
    old?.release(escaped);
    return this;
  }

  /**
   * Copies the bytes into a new shared lease and moves this storage onto it. The new lease's
   * buffer has reached no user yet (NOTE [Shared allocation]): it can be kept for reuse.
   */
  #moveToShared(): void {
    const b = allocateShared(this.nbytes);
    new Uint8Array(b.buffer).set(new Uint8Array(this.internalBuffer, this.#byteOffset, this.nbytes));
    this.#buffer = b.buffer;
    this.#byteOffset = 0;
    this.#backing = b;
    this.#escaped = false;
    this.#ownsBuffer = false; // the private buffer, if any, is left to the views the user took of it
  }

  /**
   * Drops this process's hold on the bytes now; the storage is unusable afterwards. Releasing
   * again is a no-op (as `del` and close() are), whichever tensor or storage object over
   * these bytes it comes through: a view, the storage, or the same storage received back.
   */
  release(): void {
    const buffer = this.#buffer;
    if (buffer === null) return;
    this.#buffer = null;
    const d = this.#device;
    if (d !== null) {
      deviceFinalizer.unregister(this);
      d.release();
      return;
    }
    const b = this.#backing;
    this.#backing = null;
    if (b !== null) b.release(this.#escaped);
    else if (this.#ownsBuffer) freePrivate(buffer);
  }
}

// NOTE [Releasing private memory]
// release() of a process-private storage frees its memory at once, as it gives a shared one
// back to its cache: the buffer is detached (every view over it becomes empty, as a shared
// buffer's do), which lets V8 free the backing store now instead of at a garbage collection.
// It matters to a process that makes one large temporary after another (a DataLoader worker
// making samples: NOTE [Releasing samples], collate-stream.ts): memory freed as each sample
// is done is what malloc hands out for the next one, still in the CPU's caches, where memory
// freed in a collection's burst has long left them. Only memory the storage allocated itself:
// a storage over the caller's memory (Storage.wrap, mp.tensor of a TypedArray) leaves it be.
function freePrivate(buffer: ArrayBufferLike): void {
  if (!(buffer instanceof ArrayBuffer)) return;
  try {
    addon.detach(buffer);
  } catch {
    // not detachable (never for memory allocate() made): the collector frees it
  }
}

function hostAccess(device: string): CudaHostAccessError {
  return new CudaHostAccessError(
    `This tensor's elements are on ${device}, not in this process's memory: copy it first with \`await t.to('cpu')\` (or t.cpu()).`,
  );
}

function released(): ReleasedError {
  return new ReleasedError(
    'This tensor (or its storage) was released; it cannot be used any more. Keep a clone() if you still need the data.',
  );
}
