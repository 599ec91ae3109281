// The default collate, as torch/utils/data/_utils/collate.py: a list of samples becomes one
// batch of the same structure, each leaf batched along a new first dimension.
//
// NOTE [Collate into shared memory]
// Every tensor default collate makes is allocated in shared memory (`shared: true`), as
// torch's collate_tensor_fn does inside a worker (`_new_shared` + `torch.stack(out=)`):
// the samples are copied once, straight into the segment that will travel, so sending the
// batch to the main process costs a handle and no further copy. We do it in the main
// process too (torch does not): a batch from an in-process loader can then be put on a
// queue without a copy, and a released (or collected) batch gives its segment back to the
// per-process cache, where the next batch of the same size reuses it with no system call
// and no page fault (a fresh 18 MiB private buffer costs its zeroing every time).
import { CollateError } from '../errors.js';
import { Tensor, empty, tensor, type DType, type TypedArray } from '../tensor/index.js';

type Collate = (batch: unknown[]) => unknown;

/** torch's default_collate: the batch of samples as one structure of batched leaves. */
export const defaultCollate: Collate = (batch) => collateAt(batch, 'batch');

/** torch's default_convert (batchSize null): one sample, TypedArrays wrapped as tensors, the rest as it is. */
export function defaultConvert(sample: unknown): unknown {
  if (ArrayBuffer.isView(sample) && !(sample instanceof DataView)) return tensor(sample as TypedArray);
  if (Array.isArray(sample)) return sample.map(defaultConvert);
  if (sample instanceof Map) return new Map([...sample].map(([k, v]) => [k, defaultConvert(v)]));
  if (isPlainObject(sample)) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(sample)) out[key] = defaultConvert(sample[key]);
    return out;
  }
  return sample;
}

export function isPlainObject(x: unknown): x is Record<string, unknown> {
  if (x === null || typeof x !== 'object') return false;
  const proto = Object.getPrototypeOf(x);
  return proto === Object.prototype || proto === null;
}

function kindOf(x: unknown): string {
  if (x === null) return 'null';
  if (x instanceof Tensor) return 'Tensor';
  if (ArrayBuffer.isView(x)) return x.constructor.name;
  if (Array.isArray(x)) return 'Array';
  if (x instanceof Map) return 'Map';
  if (isPlainObject(x)) return 'object';
  if (typeof x === 'object') return (x as object).constructor?.name ?? 'object';
  return typeof x;
}

function mismatch(path: string, batch: readonly unknown[], i: number): CollateError {
  return new CollateError(
    `Default collate cannot batch the samples at ${path}: sample 0 holds a ${kindOf(batch[0])} there, sample ${i} a ${kindOf(batch[i])}. ` +
      'Every sample must have the same structure; pass a collate target for anything else.',
    path,
  );
}

/** defaultCollate of the values at `path` of a batch (the name its errors give). */
export function collateAt(batch: readonly unknown[], path: string): unknown {
  const first = batch[0];
  const kind = kindOf(first);
  for (let i = 1; i < batch.length; i++) if (kindOf(batch[i]) !== kind) throw mismatch(path, batch, i);
  if (first instanceof Tensor) return stack(batch as Tensor[], path);
  if (ArrayBuffer.isView(first))
    return stack(
      batch.map((a) => tensor(a as TypedArray)),
      path,
    );
  switch (typeof first) {
    case 'number':
      return numbers(batch as number[]);
    case 'bigint':
      return fromValues(batch as bigint[], 'int64');
    case 'boolean':
      return fromValues(batch as boolean[], 'bool');
    case 'string':
      return batch.slice(); // as torch: a batch of strings stays a list of them
  }
  if (Array.isArray(first)) {
    const n = first.length;
    for (let i = 1; i < batch.length; i++) {
      if ((batch[i] as unknown[]).length !== n) {
        throw new CollateError(
          `Default collate cannot batch the samples at ${path}: sample 0 has ${n} elements there, sample ${i} has ${(batch[i] as unknown[]).length}. ` +
            'Each element in a batch of arrays must have the same length (torch: "each element in list of batch should be of equal size").',
          path,
        );
      }
    }
    const out = new Array<unknown>(n);
    for (let k = 0; k < n; k++)
      out[k] = collateAt(
        batch.map((s) => (s as unknown[])[k]),
        `${path}[${k}]`,
      );
    return out;
  }
  if (first instanceof Map) {
    const out = new Map<unknown, unknown>();
    for (const key of first.keys()) {
      const values = batch.map((s, i) => {
        if (!(s as Map<unknown, unknown>).has(key)) throw missingKey(path, String(key), i);
        return (s as Map<unknown, unknown>).get(key);
      });
      out.set(key, collateAt(values, `${path}.get(${JSON.stringify(key)})`));
    }
    return out;
  }
  if (isPlainObject(first)) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(first)) {
      const values = batch.map((s, i) => {
        if (!Object.hasOwn(s as object, key)) throw missingKey(path, key, i);
        return (s as Record<string, unknown>)[key];
      });
      out[key] = collateAt(values, `${path}.${key}`);
    }
    return out;
  }
  throw new CollateError(
    `Default collate cannot batch the samples at ${path}: it holds a ${kind}. It batches tensors, TypedArrays, numbers, bigints, booleans, ` +
      'strings, and arrays, Maps and plain objects of them; pass a collate target for anything else.',
    path,
  );
}

function missingKey(path: string, key: string, i: number): CollateError {
  return new CollateError(
    `Default collate cannot batch the samples at ${path}.${key}: sample 0 has the key '${key}', sample ${i} does not.`,
    `${path}.${key}`,
  );
}

/** Stacks along a new first dimension, copying each sample once into a shared tensor. */
function stack(batch: readonly Tensor[], path: string): Tensor {
  const first = batch[0]!;
  for (let i = 1; i < batch.length; i++) {
    const t = batch[i]!;
    if (t.dtype !== first.dtype || t.shape.length !== first.shape.length || t.shape.some((d, k) => d !== first.shape[k])) {
      throw new CollateError(
        `Default collate cannot stack the samples at ${path}: sample 0 is a ${first.dtype} tensor of shape [${first.shape.join(', ')}], ` +
          `sample ${i} a ${t.dtype} tensor of shape [${t.shape.join(', ')}]. Stacking needs one dtype and one shape ` +
          '(torch: "stack expects each tensor to be equal size"): resize or pad them in the dataset, or pass a collate target.',
        path,
      );
    }
  }
  const out = empty([batch.length, ...first.shape], { dtype: first.dtype, shared: true });
  for (let i = 0; i < batch.length; i++) out.select(0, i).copy(batch[i]!);
  return out;
}

/** Numbers: int32 when every one is an integer that fits, else float64 (API.md). */
function numbers(batch: readonly number[]): Tensor {
  const ints = batch.every((x) => Number.isInteger(x) && x >= -(2 ** 31) && x < 2 ** 31);
  return ints ? fromValues(batch, 'int32') : fromValues(batch, 'float64');
}

function fromValues(values: readonly (number | bigint | boolean)[], dtype: DType): Tensor {
  // Through copy(), which writes via the tensors' internal arrays: the shared buffer never
  // reaches user code here, so its segment can be recycled with it (NOTE [Shared allocation]).
  return empty([values.length], { dtype, shared: true }).copy(tensor(values as number[], { dtype }));
}
