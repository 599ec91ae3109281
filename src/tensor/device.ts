// Devices as src/tensor sees them: a name ('cpu', 'cuda:N') and, for a CUDA storage, a
// backing that src/cuda supplies. This floor knows nothing of the driver or of processes:
// src/cuda installs its operations with setDeviceOps() when it is first imported (as NOTE
// [Shared allocation] installs the shared allocator), which src/index.ts does.
import { CudaUnavailableError } from '../errors.js';

export type Device = 'cpu' | `cuda:${number}`;

/** One storage's lease on device memory (a piece of a chunk: src/cuda). */
export interface DeviceBacking {
  readonly device: `cuda:${number}`;
  readonly index: number;
  /** The device address of the storage's first byte. */
  readonly ptr: bigint;
  /** Opaque to this layer: the chunk, for src/cuda's reduce/rebuild. */
  readonly chunk: object;
  /** Gives the memory back (to the owner's cache, or drops a received mapping). Idempotent. */
  release(): void;
}

/** A shared CPU storage's lease (SharedBacking), as far as pinning needs it. */
export interface PinnableBacking {
  readonly segment: object;
}

export interface DeviceOps {
  /** Throws CudaUnavailableError naming the reason unless CUDA is usable. */
  require(what: string): void;
  /** 'cpu' or 'cuda:N' for a device argument ('cuda' is 'cuda:0'); throws on a bad or absent device. */
  parse(device: unknown): Device;
  allocate(index: number, nbytes: number): DeviceBacking;
  /** `count` elements of `width` bytes at `byteOffset` set to the pattern (lo, hi: its 32-bit halves). */
  fill(b: DeviceBacking, byteOffset: number, count: number, width: number, lo: number, hi: number): void;
  copyDtoD(dst: DeviceBacking, dstOffset: number, src: DeviceBacking, srcOffset: number, n: number): void;
  copyHtoD(dst: DeviceBacking, dstOffset: number, host: ArrayBufferLike, hostOffset: number, n: number): void;
  copyDtoH(host: ArrayBufferLike, hostOffset: number, src: DeviceBacking, srcOffset: number, n: number): void;
  /** Page-locks a shared segment in place (NOTE [Pinned segments]). */
  pin(backing: PinnableBacking): void;
  isPinned(backing: PinnableBacking): boolean;
}

let ops: DeviceOps | null = null;

export function setDeviceOps(o: DeviceOps): void {
  ops = o;
}

/** The installed operations; CudaUnavailableError when src/cuda was never loaded. */
export function deviceOps(): DeviceOps {
  if (ops === null) {
    throw new CudaUnavailableError(
      'CUDA support is not loaded in this program: import tensorproc from its package entry point (mp.cuda.isAvailable() is false).',
    );
  }
  return ops;
}

/** The device of an optional `device` option: 'cpu' when absent, without touching CUDA. */
export function parseDevice(device: unknown): Device {
  if (device === undefined || device === 'cpu') return 'cpu';
  return deviceOps().parse(device);
}

export function deviceIndex(device: Device): number {
  return device === 'cpu' ? -1 : Number(device.slice(5));
}
