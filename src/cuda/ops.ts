// The device operations src/tensor calls (setDeviceOps), over the addon's primitives: no
// kernels (fills are cuMemsetD*, copies cuMemcpy*), each on the device's primary context.
//
// NOTE [Pinned segments]
// t.pinMemory() page-locks the tensor's shared segment in place (cuMemHostRegister of the
// whole mapping) instead of copying it into new pinned memory as torch's pin_memory() does:
// a pinned tensor stays shared, and a DataLoader's batches, which arrive in segments the
// receive cache parks and maps again, are registered once per segment and stay so while the
// segment is mapped (recycled or parked). native/mapping.cc unregisters a mapping before it
// unmaps or evicts it, on whatever thread that happens, so no unmapped range stays
// registered with the driver.
import { addon } from '../native/index.js';
import type { Segment } from '../sharing/index.js';
import { setDeviceOps, type DeviceBacking, type PinnableBacking } from '../tensor/index.js';
import { cudaError, parseCudaDevice, requireCuda } from './driver.js';
import { takeChunk } from './cache.js';
import { ChunkLease } from './lease.js';

function run<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw cudaError(e, what);
  }
}

function segmentOf(b: PinnableBacking): Segment {
  return b.segment as Segment;
}

setDeviceOps({
  require: requireCuda,
  parse: parseCudaDevice,
  allocate(index: number, nbytes: number): DeviceBacking {
    requireCuda('A CUDA tensor');
    return new ChunkLease(takeChunk(index, nbytes), 0, nbytes);
  },
  fill(b, byteOffset, count, width, lo, hi) {
    run('filling a CUDA tensor', () => addon.cudaMemset(b.index, b.ptr + BigInt(byteOffset), count, width, lo, hi));
  },
  copyDtoD(dst, dstOffset, src, srcOffset, n) {
    run('copying between CUDA tensors', () => addon.cudaCopyDtoD(dst.index, dst.ptr + BigInt(dstOffset), src.ptr + BigInt(srcOffset), n));
  },
  copyHtoD(dst, dstOffset, host, hostOffset, n) {
    run(`copying to ${dst.device}`, () => addon.cudaCopyHtoD(dst.index, dst.ptr + BigInt(dstOffset), host, hostOffset, n));
  },
  copyDtoH(host, hostOffset, src, srcOffset, n) {
    run(`copying from ${src.device}`, () => addon.cudaCopyDtoH(src.index, host, hostOffset, src.ptr + BigInt(srcOffset), n));
  },
  pin(b) {
    requireCuda('pinMemory()');
    const seg = segmentOf(b);
    run('pinning a shared segment (cuMemHostRegister)', () => addon.cudaPin(seg.mapping));
  },
  isPinned(b) {
    const seg = segmentOf(b);
    return !seg.unmapped && addon.cudaIsPinned(seg.mapping);
  },
});
