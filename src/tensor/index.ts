export { Tensor } from './tensor.js';
export { Storage, setSharedAllocator } from './storage.js';
export type { SharedBacking, SharedAllocator } from './storage.js';
export { empty, zeros, full, tensor } from './create.js';
export type { TensorOptions, FromDataOptions } from './create.js';
export { DTYPES, dtypeInfo } from './dtype.js';
export type { DType, Scalar, TypedArray } from './dtype.js';
