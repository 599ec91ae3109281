export { Tensor } from './tensor.js';
export { Storage, setSharedAllocator } from './storage.js';
export type { SharedBacking, SharedAllocator } from './storage.js';
export { empty, zeros, full, tensor } from './create.js';
export type { TensorOptions, FromDataOptions } from './create.js';
export { DTYPES, dtypeInfo } from './dtype.js';
export type { DType, Scalar, TypedArray } from './dtype.js';
export { setDeviceOps, parseDevice, deviceIndex } from './device.js';
export type { Device, DeviceBacking, DeviceOps, PinnableBacking } from './device.js';
