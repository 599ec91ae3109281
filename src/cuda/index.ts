// mp.cuda: the CUDA side of tensorproc (docs/cuda.md). Importing it installs the device
// operations src/tensor uses (ops.ts); nothing touches the driver until a call needs it.
import './ops.js';
import { addon } from '../native/index.js';
import {
  deviceCount,
  deviceInfo,
  driverVersion,
  isAvailable,
  libraryPath,
  requireCuda,
  unavailableReason,
  cudaError,
  parseCudaDevice,
} from './driver.js';
import type { DeviceInfo } from './driver.js';
import { cacheStats, emptyCudaCache } from './cache.js';
import { deviceIndex } from '../tensor/index.js';

export { exportChunk, importChunk } from './share.js';
export type { ExportedChunk } from './share.js';
export type { DeviceInfo } from './driver.js';

export interface CudaStatus {
  readonly available: boolean;
  readonly reason: string | null;
  readonly driverVersion: string | null;
  readonly library: string;
  readonly devices: DeviceInfo[];
}

function index(device: unknown): number {
  return device === undefined ? 0 : deviceIndex(parseCudaDevice(typeof device === 'number' ? `cuda:${device}` : device));
}

export const cuda = {
  /** Whether a driver with at least one device is usable here; never throws. */
  isAvailable,
  /** CUDA devices this process sees (0 when unavailable). */
  deviceCount,
  /** Why CUDA is unavailable (no driver, no device, driver too old), or null. */
  unavailableReason,
  /** The driver, its devices and whether each can share memory between processes. */
  status(): CudaStatus {
    const available = isAvailable();
    const devices: DeviceInfo[] = [];
    for (let i = 0; i < deviceCount(); i++) devices.push(deviceInfo(i));
    return { available, reason: unavailableReason(), driverVersion: driverVersion(), library: libraryPath(), devices };
  },
  /** Free and total bytes of a device's memory. */
  memGetInfo(device?: number | string): { free: number; total: number } {
    requireCuda('mp.cuda.memGetInfo()');
    const i = index(device);
    try {
      const [free, total] = addon.cudaMemGetInfo(i);
      return { free, total };
    } catch (e) {
      throw cudaError(e, 'reading device memory');
    }
  },
  /** Waits for every piece of work queued on a device by this process. */
  async synchronize(device?: number | string): Promise<void> {
    requireCuda('mp.cuda.synchronize()');
    const i = index(device);
    try {
      addon.cudaSynchronize(i);
    } catch (e) {
      throw cudaError(e, 'synchronizing the device');
    }
  },
  /** Gives back the device memory this process keeps cached (torch.cuda.empty_cache()); tensors in use keep working. */
  emptyCache(): void {
    if (isAvailable()) emptyCudaCache();
  },
  /** This process's chunks and pinned memory, for doctor and tests. */
  stats(): { chunks: number; mapped: number; free: number; freeBytes: number; busy: number; pinnedBytes: number; pinnedRanges: number } {
    const native = addon.cudaStats();
    const c = cacheStats();
    return {
      chunks: c.chunks,
      mapped: native.chunks,
      free: c.free,
      freeBytes: c.freeBytes,
      busy: c.busy,
      pinnedBytes: native.pinnedBytes,
      pinnedRanges: native.pinnedRanges,
    };
  },
};
