// The CUDA driver as this process sees it: loaded lazily (nothing CUDA happens at import),
// why it is unusable when it is, its devices, and its errors as coded classes.
// NOTE [Reaching the driver] (native/cuda.cc) says how the addon finds it.
import { addon } from '../native/index.js';
import { envString } from '../env.js';
import { CudaDriverError, CudaOutOfMemoryError, CudaUnavailableError, InvalidArgumentError } from '../errors.js';
import { describeValue } from '../describe-value.js';
import type { Device } from '../tensor/index.js';

export interface DeviceInfo {
  readonly index: number;
  readonly name: string;
  readonly uuid: string;
  readonly totalBytes: number;
  /** Virtual memory management and POSIX descriptor handles: its memory can travel to other processes. */
  readonly canShare: boolean;
  readonly computeMode: number;
  /** Allocation granularity (bytes): a chunk's size is a multiple of it. */
  readonly granularity: number;
}

interface Loaded {
  ok: boolean;
  reason: string;
  driverVersion: number;
  devices: number;
  library: string;
}

let loaded: Loaded | null = null;
const infos: (DeviceInfo | undefined)[] = [];

function load(): Loaded {
  if (loaded === null) loaded = addon.cudaLoad(envString('TENSORPROC_CUDA_LIBRARY') ?? '');
  return loaded;
}

/** Whether a driver with at least one device is usable here; never throws. */
export function isAvailable(): boolean {
  return load().ok;
}

/** Devices visible to this process (0 when CUDA is unavailable). */
export function deviceCount(): number {
  const l = load();
  return l.ok ? l.devices : 0;
}

/** Why CUDA is unavailable here (no driver, no device, a driver too old), or null when it is available. */
export function unavailableReason(): string | null {
  const l = load();
  return l.ok ? null : l.reason;
}

/** The driver's version as CUDA writes it ("13.0"), or null without a driver. */
export function driverVersion(): string | null {
  const v = load().driverVersion;
  return v > 0 ? `${Math.floor(v / 1000)}.${(v % 1000) / 10}` : null;
}

export function libraryPath(): string {
  return load().library;
}

/** Throws CudaUnavailableError naming the reason unless CUDA is usable. */
export function requireCuda(what: string): void {
  const l = load();
  if (!l.ok) throw new CudaUnavailableError(`${what} needs CUDA, which is unavailable here: ${l.reason} (mp.cuda.isAvailable() is false).`);
}

export function deviceInfo(index: number): DeviceInfo {
  const known = infos[index];
  if (known !== undefined) return known;
  let d: ReturnType<typeof addon.cudaDevice>;
  try {
    d = addon.cudaDevice(index);
  } catch (e) {
    throw cudaError(e, `reading device ${index}'s properties`);
  }
  const info: DeviceInfo = {
    index,
    name: d.name,
    uuid: d.uuid,
    totalBytes: d.totalBytes,
    canShare: d.vmm && d.posixFd,
    computeMode: d.computeMode,
    granularity: d.granularity > 0 ? d.granularity : 2 ** 21,
  };
  infos[index] = info;
  return info;
}

/** The index of the visible device with this UUID, or -1. */
export function deviceByUuid(uuid: string): number {
  for (let i = 0; i < deviceCount(); i++) if (deviceInfo(i).uuid === uuid) return i;
  return -1;
}

/** 'cuda' -> 'cuda:0'; 'cuda:N' checked against the visible devices. */
export function parseCudaDevice(device: unknown): Device {
  if (device === 'cpu') return 'cpu';
  const m = typeof device === 'string' ? /^cuda(?::(0|[1-9]\d{0,3}))?$/.exec(device) : null;
  if (m === null) {
    throw new InvalidArgumentError(`device must be 'cpu', 'cuda' or 'cuda:N', got ${describeValue(device)}.`);
  }
  requireCuda(`device '${device as string}'`);
  const index = m[1] === undefined ? 0 : Number(m[1]);
  if (index >= deviceCount()) {
    throw new InvalidArgumentError(
      `device '${device as string}' does not exist: this process sees ${deviceCount()} CUDA device${deviceCount() === 1 ? '' : 's'} (cuda:0${deviceCount() > 1 ? `..cuda:${deviceCount() - 1}` : ''}).`,
    );
  }
  return `cuda:${index}`;
}

interface CuLike {
  code?: string;
  cuResult?: number;
  call?: string;
  message?: string;
}

/** An addon CUDA error as a coded class; `what` says what tensorproc was doing, in the user's terms. */
export function cudaError(e: unknown, what: string): Error {
  const err = (e ?? {}) as CuLike;
  if (err.code === 'CUDA_UNAVAILABLE') return new CudaUnavailableError(`${what}: ${err.message ?? ''} (mp.cuda.isAvailable() is false).`);
  if (typeof err.cuResult !== 'number') return e as Error;
  if (err.cuResult === 2) {
    return new CudaOutOfMemoryError(
      `${what}: the device is out of memory (${err.call}). Release CUDA tensors you no longer need; mp.cuda.emptyCache() gives back what tensorproc keeps cached.`,
      err,
    );
  }
  return new CudaDriverError(`${what}: ${err.message ?? err.code}.`, err);
}
