// Tensor: a typed n-d view (shape, stride, offset in elements) over a Storage, as in torch.
import { IndexOutOfRangeError, InvalidShapeError, NotContiguousError, InvalidArgumentError } from '../errors.js';
import { type DType, type DTypeInfo, type Scalar, type TypedArray, dtypeInfo } from './dtype.js';
import { readScalar, writeScalar, forEachOffset } from './elements.js';
import { checkDim, checkIndex, checkInt, contiguousStrides, inferShape } from './shape.js';
import { Storage } from './storage.js';
import { fillRun } from './fill.js';
import { checkArgCount } from '../arguments.js';
import { describeValue } from '../describe-value.js';
import { type Device, deviceIndex, deviceOps, parseDevice } from './device.js';
import { devicePattern } from './device-pattern.js';
import { assertDeviceCopy, assertDeviceCopyOut, assertDeviceFill, assertPinnable, assertWritable, cudaIndexError } from './guards.js';

export class Tensor {
  readonly storage: Storage;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly stride: readonly number[];
  readonly offset: number;
  readonly #info: DTypeInfo;
  readonly #numel: number;
  // Typed arrays are made lazily and cached; the storage's buffer changes on shareMemory(),
  // so each cache entry is checked against it.
  #elements: TypedArray | null = null;
  #data: TypedArray | null = null;

  /**
   * Makes a view; the factories (empty, zeros, tensor…) and view methods call this.
   * Checks that every element the view can address lies inside the storage.
   */
  constructor(storage: Storage, dtype: DType | DTypeInfo, shape: readonly number[], stride?: readonly number[], offset = 0) {
    const info = typeof dtype === 'string' ? dtypeInfo(dtype) : dtype;
    this.storage = storage;
    this.dtype = info.name;
    this.#info = info;
    // Callers pass arrays they made for this tensor and never touch again: no copies here.
    this.shape = shape;
    this.stride = stride ?? contiguousStrides(shape);
    this.offset = offset;
    let n = 1;
    let maxIndex = offset;
    for (let i = 0; i < shape.length; i++) {
      n *= shape[i]!;
      maxIndex += (shape[i]! - 1) * this.stride[i]!;
    }
    this.#numel = n;
    const capacity = Math.floor(storage.nbytes / info.itemsize);
    if (n > 0 && (offset < 0 || maxIndex >= capacity)) {
      throw new InvalidShapeError(
        `A view of shape [${shape.join(', ')}] at offset ${offset} does not fit a storage of ${capacity} ${info.name} elements.`,
      );
    }
  }

  /** 'cpu', or 'cuda:N' for a tensor whose elements are on a CUDA device. */
  get device(): Device {
    return this.storage.device;
  }

  get ndim(): number {
    return this.shape.length;
  }
  dim(): number {
    checkArgCount('Tensor.dim()', arguments, 0);
    return this.shape.length;
  }
  numel(): number {
    checkArgCount('Tensor.numel()', arguments, 0);
    return this.#numel;
  }

  isContiguous(): boolean {
    checkArgCount('Tensor.isContiguous()', arguments, 0);
    // As in torch, a tensor with no elements is contiguous whatever its strides.
    if (this.#numel === 0) return true;
    let expected = 1;
    for (let i = this.shape.length - 1; i >= 0; i--) {
      const size = this.shape[i]!;
      if (size !== 1 && this.stride[i] !== expected) return false;
      expected *= size;
    }
    return true;
  }

  /** The whole storage as elements of this dtype (internal; views index into it). */
  #all(): TypedArray {
    const buffer = this.storage.internalBuffer;
    this.storage.checkIntact();
    if (this.#elements === null || this.#elements.buffer !== buffer) {
      const { array, itemsize } = this.#info;
      this.#elements = new array(buffer, this.storage.byteOffset, Math.floor(this.storage.nbytes / itemsize));
    }
    return this.#elements;
  }

  /** A TypedArray over exactly this tensor's elements (raw words for float16/bfloat16). */
  get data(): TypedArray {
    const buffer = this.storage.buffer;
    this.storage.checkIntact();
    if (this.#data !== null && this.#data.buffer === buffer) return this.#data;
    if (!this.isContiguous()) {
      throw new NotContiguousError('This tensor is not contiguous, so its elements are not one run of memory: call .contiguous() first.');
    }
    const { array, itemsize } = this.#info;
    // An empty view's offset may point past the end of its storage (narrow(d, size, 0) of a
    // narrowed view): it has no bytes to show, so it is shown at the start.
    const at = this.#numel === 0 ? 0 : this.offset * itemsize;
    this.#data = new array(buffer, this.storage.byteOffset + at, this.#numel);
    return this.#data;
  }

  #indexOf(index: readonly unknown[]): number {
    if (index.length !== this.shape.length) {
      throw new IndexOutOfRangeError(
        `Expected ${this.shape.length} indices for a tensor of shape [${this.shape.join(', ')}], got ${index.length}.`,
      );
    }
    let at = this.offset;
    for (let d = 0; d < index.length; d++) at += checkIndex(index[d], this.shape[d]!, d) * this.stride[d]!;
    return at;
  }

  get(...index: number[]): Scalar {
    const at = this.#indexOf(index);
    const v = readScalar(this.#info, this.#all()[at]!);
    this.storage.checkIntact(); // the read itself may have found the file shrunk
    return v;
  }

  set(index: readonly number[], value: Scalar): this {
    checkArgCount('Tensor.set()', arguments, 2);
    if (!Array.isArray(index)) throw new InvalidArgumentError('set(index, value) takes the index as an array: t.set([i, j], v).');
    assertWritable(this.storage, 'set');
    const at = this.#indexOf(index);
    (this.#all() as unknown as (number | bigint)[])[at] = writeScalar(this.#info, value);
    return this;
  }

  // --- views ------------------------------------------------------------------------------
  /** select() and narrow() pick along a dimension, which a 0-d tensor does not have. */
  #needDims(op: string): void {
    if (this.ndim === 0) {
      throw new IndexOutOfRangeError(
        `${op}() cannot be applied to a 0-d tensor: it has no dimensions. Read its value with get(), or view(1) it first.`,
      );
    }
  }

  #view(shape: number[], stride: number[], offset: number): Tensor {
    this.storage.assertUsable(); // a view of released memory would only fail later, further from the cause
    return new Tensor(this.storage, this.#info, shape, stride, offset);
  }

  select(dim: number, i: number): Tensor {
    checkArgCount('Tensor.select()', arguments, 2);
    this.#needDims('select');
    const d = checkDim(dim, this.ndim);
    const k = checkIndex(i, this.shape[d]!, d);
    const shape = this.shape.slice();
    const stride = this.stride.slice();
    shape.splice(d, 1);
    stride.splice(d, 1);
    return this.#view(shape, stride, this.offset + k * this.stride[d]!);
  }

  narrow(dim: number, start: number, length: number): Tensor {
    checkArgCount('Tensor.narrow()', arguments, 3);
    this.#needDims('narrow');
    const d = checkDim(dim, this.ndim);
    const size = this.shape[d]!;
    const s0 = checkInt(start, 'narrow start');
    const len = checkInt(length, 'narrow length');
    const s = s0 < 0 ? s0 + size : s0;
    if (s < 0 || len < 0 || s + len > size) {
      throw new IndexOutOfRangeError(`narrow(${dim}, ${start}, ${length}) is out of range for dimension ${d} of size ${size}.`);
    }
    const shape = this.shape.slice();
    shape[d] = len;
    return this.#view(shape, this.stride.slice(), this.offset + s * this.stride[d]!);
  }

  transpose(dim0: number, dim1: number): Tensor {
    checkArgCount('Tensor.transpose()', arguments, 2);
    const a = checkDim(dim0, this.ndim);
    const b = checkDim(dim1, this.ndim);
    // A 0-d tensor accepts dims 0 and -1 (as torch does) and has nothing to swap.
    if (this.ndim === 0) return this.#view([], [], this.offset);
    const shape = this.shape.slice();
    const stride = this.stride.slice();
    [shape[a], shape[b]] = [shape[b]!, shape[a]!];
    [stride[a], stride[b]] = [stride[b]!, stride[a]!];
    return this.#view(shape, stride, this.offset);
  }

  /** A view with a new shape (one size may be -1); the tensor must be contiguous. */
  view(...shape: number[] | [number[]]): Tensor {
    const dims = inferShape(shape, this.#numel);
    if (!this.isContiguous()) {
      throw new NotContiguousError('view() needs a contiguous tensor: use reshape(), which copies when it must, or contiguous().view().');
    }
    return this.#view(dims, contiguousStrides(dims), this.offset);
  }

  /** view() when possible, else a contiguous copy with the new shape. */
  reshape(...shape: number[] | [number[]]): Tensor {
    const dims = inferShape(shape, this.#numel);
    return (this.isContiguous() ? this : this.contiguous()).view(dims);
  }

  // --- copies -----------------------------------------------------------------------------
  contiguous(): Tensor {
    checkArgCount('Tensor.contiguous()', arguments, 0);
    return this.isContiguous() ? this : this.clone();
  }

  /** A contiguous copy in new, process-private memory (as torch's clone()). */
  clone(): Tensor {
    checkArgCount('Tensor.clone()', arguments, 0);
    if (this.storage.device !== 'cpu') {
      const out = new Tensor(Storage.onDevice(deviceIndex(this.device), this.#numel * this.#info.itemsize), this.#info, this.shape);
      return out.copy(this);
    }
    // Every element is copied next: no need for zeroed memory (NOTE [Uninitialized private memory]).
    const out = new Tensor(Storage.allocate(this.#numel * this.#info.itemsize, false, false), this.dtype, this.shape);
    return out.copy(this);
  }

  fill(value: Scalar): this {
    checkArgCount('Tensor.fill()', arguments, 1);
    assertWritable(this.storage, 'fill');
    const raw = writeScalar(this.#info, value);
    const device = this.storage.deviceBacking;
    if (device !== null) {
      assertDeviceFill(this);
      const { width, lo, hi } = devicePattern(this.#info, raw);
      deviceOps().fill(device, this.offset * this.#info.itemsize, this.#numel, width, lo, hi);
      return this;
    }
    const all = this.#all();
    if (this.isContiguous()) {
      fillRun(all, this.#info, raw, this.offset, this.offset + this.#numel);
    } else {
      const a = all as unknown as (number | bigint)[];
      forEachOffset(this.shape, this.stride, this.offset, (i) => {
        a[i] = raw;
      });
    }
    return this;
  }

  /** Copies src's elements into this tensor (same shape; dtypes are converted as torch does). */
  copy(src: Tensor): this {
    checkArgCount('Tensor.copy()', arguments, 1);
    if (!(src instanceof Tensor)) throw new InvalidArgumentError(`copy() takes a Tensor (got ${describeValue(src)}).`);
    assertWritable(this.storage, 'copy');
    if (src.shape.length !== this.shape.length || src.shape.some((d, i) => d !== this.shape[i])) {
      throw new InvalidShapeError(`copy(): shapes differ, [${src.shape.join(', ')}] into [${this.shape.join(', ')}].`);
    }
    if (this.#numel === 0) return this;
    if (src.device !== 'cpu' || this.device !== 'cpu') {
      assertDeviceCopy(this, src);
      const n = this.#numel * this.#info.itemsize;
      deviceOps().copyDtoD(
        this.storage.deviceBacking!,
        this.offset * this.#info.itemsize,
        src.storage.deviceBacking!,
        src.offset * src.#info.itemsize,
        n,
      );
      return this;
    }
    if (src.dtype === this.dtype && src.isContiguous() && this.isContiguous()) {
      // Through the internal arrays, not `data`: copying does not hand either buffer to user
      // code, so it must not cost the recycled lease its buffer (NOTE [Shared allocation]).
      const from = src.#all().subarray(src.offset, src.offset + src.#numel);
      (this.#all() as unknown as { set(a: ArrayLike<number | bigint>, at: number): void }).set(
        from as ArrayLike<number | bigint>,
        this.offset,
      );
      src.storage.checkIntact();
      return this;
    }
    const values: Scalar[] = [];
    const srcAll = src.#all();
    forEachOffset(src.shape, src.stride, src.offset, (i) => {
      values.push(readScalar(src.#info, srcAll[i]!));
    });
    const dst = this.#all() as unknown as (number | bigint)[];
    const info = this.#info;
    src.storage.checkIntact();
    forEachOffset(this.shape, this.stride, this.offset, (i, k) => {
      dst[i] = convert(info, values[k]!);
    });
    return this;
  }

  /** Nested arrays of the elements (a scalar for a 0-d tensor). */
  toArray(): unknown {
    checkArgCount('Tensor.toArray()', arguments, 0);
    const all = this.#all();
    const flat: Scalar[] = [];
    forEachOffset(this.shape, this.stride, this.offset, (i) => {
      flat.push(readScalar(this.#info, all[i]!));
    });
    this.storage.checkIntact();
    if (this.shape.length === 0) return flat[0];
    let k = 0;
    const build = (d: number): unknown[] => {
      const out: unknown[] = [];
      for (let i = 0; i < this.shape[d]!; i++) out.push(d === this.shape.length - 1 ? flat[k++] : build(d + 1));
      return out;
    };
    return build(0);
  }

  // --- devices ----------------------------------------------------------------------------
  /**
   * This tensor on `device`: itself when it is there already, else a contiguous copy
   * (torch's to()). A promise, so that a large copy never has to hold the event loop.
   */
  async to(device: Device | 'cuda'): Promise<Tensor> {
    const target = parseDevice(device);
    if (target === this.device) return this;
    this.storage.assertUsable();
    return copyAcross(this, target);
  }

  /** `to('cpu')`. */
  cpu(): Promise<Tensor> {
    return this.to('cpu');
  }

  /** `to('cuda:N')` (device 0 by default). */
  cuda(index = 0): Promise<Tensor> {
    const refused = cudaIndexError(index);
    if (refused !== null) return Promise.reject(refused);
    return this.to(`cuda:${index}`);
  }

  /**
   * Page-locks this CPU tensor's memory for fast copies to a device (torch pin_memory()): in
   * place, by registering its shared segment (moved into shared memory first if it is
   * private, one copy, as shareMemory()). NOTE [Pinned segments].
   */
  pinMemory(): this {
    checkArgCount('Tensor.pinMemory()', arguments, 0);
    assertPinnable(this);
    const ops = deviceOps();
    ops.require('pinMemory()'); // first: nothing moves into shared memory without a driver
    this.storage.shareMemory();
    ops.pin(this.storage.backing!);
    return this;
  }

  /** Whether this CPU tensor's memory is page-locked (false without CUDA, and for CUDA tensors). */
  isPinned(): boolean {
    checkArgCount('Tensor.isPinned()', arguments, 0);
    const b = this.storage.isReleased() ? null : this.storage.backing;
    if (b === null || this.device !== 'cpu') return false;
    try {
      return deviceOps().isPinned(b);
    } catch {
      return false;
    }
  }

  // --- sharing ----------------------------------------------------------------------------
  /** torch share_memory_(): moves the storage into shared memory in place; no-op if shared. */
  shareMemory(): this {
    checkArgCount('Tensor.shareMemory()', arguments, 0);
    this.storage.shareMemory();
    return this;
  }

  isShared(): boolean {
    checkArgCount('Tensor.isShared()', arguments, 0);
    return this.storage.isShared();
  }

  /**
   * Drops this process's hold on the storage now: every view over it becomes unusable.
   * Releasing again, through this tensor or any other over the storage, is a no-op.
   */
  release(): void {
    checkArgCount('Tensor.release()', arguments, 0);
    this.#elements = null;
    this.#data = null;
    this.storage.release();
  }

  /** `using t = …`: releases at the end of the scope (a no-op if already released). */
  [Symbol.dispose](): void {
    this.release();
  }

  toString(): string {
    const where = this.storage.device === 'cpu' ? (this.isShared() ? ', shared' : '') : `, device=${this.storage.device}`;
    return `Tensor(shape=[${this.shape.join(', ')}], dtype=${this.dtype}${where})`;
  }
}

/** Conversion for copy(): like a cast, so a float into an int64 tensor truncates. */
function convert(info: DTypeInfo, v: Scalar): number | bigint {
  if (info.kind === 'bigint' && typeof v === 'number') return BigInt(Number.isFinite(v) ? Math.trunc(v) : 0);
  if (typeof v === 'bigint' && info.kind !== 'bigint') return writeScalar(info, info.kind === 'bool' ? v : Number(v));
  return writeScalar(info, v);
}

/** A contiguous copy of `t` on `target` (another device than its own): Tensor.to(). */
function copyAcross(t: Tensor, target: Device): Tensor {
  const info = dtypeInfo(t.dtype);
  const nbytes = t.numel() * info.itemsize;
  const ops = deviceOps();
  if (t.device === 'cpu') {
    const host = t.contiguous();
    const out = new Tensor(Storage.onDevice(deviceIndex(target), nbytes), info, t.shape.slice());
    ops.copyHtoD(out.storage.deviceBacking!, 0, host.storage.internalBuffer, host.storage.byteOffset + host.offset * info.itemsize, nbytes);
    if (host !== t) host.release();
    return out;
  }
  assertDeviceCopyOut(t);
  const out = new Tensor(Storage.allocate(nbytes, false, false), info, t.shape.slice());
  ops.copyDtoH(out.storage.internalBuffer, out.storage.byteOffset, t.storage.deviceBacking!, t.offset * info.itemsize, nbytes);
  if (target === 'cpu') return out;
  const there = copyAcross(out, target); // between two devices, through the host (v1)
  out.release();
  return there;
}
