// What a tensor's memory cannot do, refused before any element is touched (so that a refused
// call changes nothing): writing to a file mapped read-only (fromFile() without writable:
// true: NOTE [File storages]), and what CUDA tensors do not support in v1 (one device per
// operation, contiguous views only, pinning for CPU memory alone). Tensor's methods call these.
import { DeviceMismatchError, InvalidArgumentError, NotContiguousError, ReadOnlyError } from '../errors.js';
import { describeValue } from '../describe-value.js';
import type { Device } from './device.js';
import type { DType } from './dtype.js';
import type { Storage } from './storage.js';

/** What the guards look at of a Tensor (tensor.ts, which imports this file). */
interface Tensor {
  readonly device: Device;
  readonly dtype: DType;
  isContiguous(): boolean;
}

/** Writing methods (`op`) refuse a read-only storage (a file mapped with fromFile(), not writable). */
export function assertWritable(storage: Storage, op: string): void {
  if (storage.readOnly) {
    throw new ReadOnlyError(
      `${op}(): this tensor maps a file read-only (fromFile without writable: true). Map it with { writable: true } to write to the file, or write to a clone().`,
    );
  }
}

/** fill() of a CUDA tensor: a contiguous one only. */
export function assertDeviceFill(t: Tensor): void {
  if (!t.isContiguous()) throw new NotContiguousError('fill() of a non-contiguous CUDA view is not supported: fill a contiguous tensor.');
}

/** copy() where either tensor is on a CUDA device: both on the same one, one dtype, contiguous. */
export function assertDeviceCopy(into: Tensor, src: Tensor): void {
  if (src.device !== into.device) {
    throw new DeviceMismatchError(
      `copy() of a ${src.device} tensor into a ${into.device} one: devices differ. Use \`await src.to('${into.device}')\` first.`,
    );
  }
  if (src.dtype !== into.dtype || !src.isContiguous() || !into.isContiguous()) {
    throw new NotContiguousError('copy() between CUDA tensors needs one dtype and contiguous tensors: use contiguous() views.');
  }
}

/** to() from a CUDA tensor: a contiguous one only. */
export function assertDeviceCopyOut(t: Tensor): void {
  if (!t.isContiguous()) {
    throw new NotContiguousError('Copying a non-contiguous CUDA view is not supported: copy the whole tensor, or a contiguous view of it.');
  }
}

/** pinMemory(): CPU memory only. */
export function assertPinnable(t: Tensor): void {
  if (t.device !== 'cpu') throw new InvalidArgumentError(`pinMemory() pins CPU memory; this tensor is on ${t.device}.`);
}

/** cuda(index): the error for an index that is not a device number, or null. */
export function cudaIndexError(index: unknown): InvalidArgumentError | null {
  if (Number.isSafeInteger(index) && (index as number) >= 0) return null;
  return new InvalidArgumentError(`cuda(index) takes a device number >= 0, got ${describeValue(index)}.`);
}
