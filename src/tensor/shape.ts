// Shape arithmetic and validation, shared by the tensor factories and views.
import { InvalidShapeError, IndexOutOfRangeError, InvalidArgumentError } from '../errors.js';

export type Shape = readonly number[];

export const MAX_DIMS = 64;

/** Validates a shape (non-negative safe integers) and returns a frozen copy. */
export function checkShape(shape: unknown, what = 'shape'): number[] {
  const dims = typeof shape === 'number' ? [shape] : shape;
  if (!Array.isArray(dims)) {
    throw new InvalidShapeError(`${what} must be an array of non-negative integers, got ${describe(shape)}.`);
  }
  if (dims.length > MAX_DIMS) throw new InvalidShapeError(`${what} has ${dims.length} dimensions; at most ${MAX_DIMS} are supported.`);
  for (const d of dims) {
    if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0) {
      throw new InvalidShapeError(`${what} [${dims.map(describe).join(', ')}] is invalid: every size must be a non-negative integer.`);
    }
  }
  return dims.slice();
}

/** Number of elements; throws when the byte size would not be an exact JS number. */
export function numelOf(shape: Shape, itemsize: number): number {
  let n = 1;
  for (const d of shape) n *= d;
  if (!Number.isSafeInteger(n * itemsize)) {
    throw new InvalidShapeError(`shape [${shape.join(', ')}] is too large: ${n} elements cannot be addressed.`);
  }
  return n;
}

export function contiguousStrides(shape: Shape): number[] {
  const stride = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    stride[i] = s;
    s *= Math.max(shape[i]!, 1);
  }
  return stride;
}

/** Normalises a (possibly negative) dimension index. */
export function checkDim(dim: unknown, ndim: number): number {
  if (typeof dim !== 'number' || !Number.isInteger(dim) || dim < -Math.max(ndim, 1) || dim >= Math.max(ndim, 1)) {
    const n = Math.max(ndim, 1);
    throw new IndexOutOfRangeError(
      `Dimension ${describe(dim)} is out of range for a tensor with ${ndim} dimension(s) (use -${n}..${n - 1}).`,
    );
  }
  return dim < 0 ? dim + ndim : dim;
}

/** Normalises a (possibly negative) index along a dimension of the given size. */
export function checkIndex(i: unknown, size: number, dim: number): number {
  if (typeof i !== 'number' || !Number.isInteger(i) || i < -size || i >= size) {
    throw new IndexOutOfRangeError(`Index ${describe(i)} is out of range for dimension ${dim} of size ${size}.`);
  }
  return i < 0 ? i + size : i;
}

/** Resolves one -1 in a view shape against the element count. */
export function inferShape(shape: unknown[], numel: number): number[] {
  const dims = shape.length === 1 && Array.isArray(shape[0]) ? (shape[0] as unknown[]) : shape;
  let infer = -1;
  let known = 1;
  const out: number[] = [];
  for (let i = 0; i < dims.length; i++) {
    const d = dims[i];
    if (d === -1) {
      if (infer >= 0) throw new InvalidShapeError('Only one dimension of a view can be -1.');
      infer = i;
      out.push(1);
      continue;
    }
    if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0) {
      throw new InvalidShapeError(`Shape [${dims.map(describe).join(', ')}] is invalid: sizes must be non-negative integers or one -1.`);
    }
    known *= d;
    out.push(d);
  }
  if (infer >= 0) {
    if (known === 0 || numel % known !== 0) {
      throw new InvalidShapeError(`Shape [${dims.join(', ')}] is invalid for ${numel} elements.`);
    }
    out[infer] = numel / known;
  } else if (known !== numel) {
    throw new InvalidShapeError(`Shape [${dims.join(', ')}] holds ${known} elements, but the tensor has ${numel}.`);
  }
  return out;
}

export function checkInt(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
    throw new InvalidArgumentError(`${what} must be an integer, got ${describe(v)}.`);
  }
  return v;
}

export function describe(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'bigint') return `${v}n`;
  if (Array.isArray(v)) return `[${v.map(describe).join(', ')}]`;
  if (v === null || typeof v !== 'object') return String(v);
  return Object.prototype.toString.call(v);
}
