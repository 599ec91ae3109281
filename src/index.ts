// The public API: a list of exports, nothing else (see ../shared/API.md).
export * from './errors.js';
export { Tensor, Storage, empty, zeros, full, tensor, DTYPES } from './tensor/index.js';
export type { DType, Scalar, TypedArray, TensorOptions, FromDataOptions, Device } from './tensor/index.js';
export { cuda } from './cuda/index.js';
export type { CudaStatus, DeviceInfo } from './cuda/index.js';
export { getAllSharingStrategies, getSharingStrategy, setSharingStrategy, emptyCache } from './sharing/index.js';
export type { SharingStrategy } from './sharing/index.js';
export { memoryStats } from './sharing/index.js';
export type { MemoryStats, SegmentCount } from './sharing/index.js';
export * from './process/index.js';
export * from './queue/index.js';
export * from './data/index.js';
export * from './pool/index.js';
export * from './sync/index.js';
