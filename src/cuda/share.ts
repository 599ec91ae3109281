// CUDA storages across process boundaries: what a message carries (the chunk's exported
// descriptor, its header's descriptor, where the storage lies in the chunk) and how a
// received one becomes a lease again. NOTE [CUDA chunk lifetime] (chunk.ts), NOTE [CUDA
// ordering] below.
//
// NOTE [CUDA ordering]
// A sender synchronizes the device's primary context (cuCtxSynchronize: every stream in it,
// tensorproc's and other libraries') before a CUDA storage leaves, so a receiver never reads
// before the sender's writes are done and needs no wait of its own. torch records one
// interprocess event per send instead, capped at 1000 live ones; with no kernels of our own
// and the legacy stream for our copies, a synchronize is the whole story. It blocks the
// sending thread for the work queued on the device (idle: microseconds on the stand-in; the
// device script measures it).
import { addon } from '../native/index.js';
import { BadHandleError, CudaDeviceNotVisibleError, CudaNotForwardableError } from '../errors.js';
import { Segment, fdIdentity } from '../sharing/index.js';
import type { DeviceBacking } from '../tensor/index.js';
import { Chunk, META_BYTES, readMeta } from './chunk.js';
import { chunks, relend } from './cache.js';
import { cudaError, deviceByUuid, requireCuda } from './driver.js';
import { ChunkLease } from './lease.js';

export interface ExportedChunk {
  readonly deviceFd: number;
  readonly headerFd: number;
  readonly offset: number;
  readonly chunkBytes: number;
  /** Gives back the references added for a message that was not sent. */
  readonly undo: () => void;
}

/** Prepares a CUDA storage's lease to travel to `copies` receivers (NOTE [CUDA ordering]). */
export function exportChunk(backing: DeviceBacking, copies: number): ExportedChunk {
  const lease = backing as ChunkLease;
  const c = lease.chunk;
  try {
    addon.cudaSynchronize(c.index);
  } catch (e) {
    throw cudaError(e, 'waiting for the device before sending a CUDA tensor');
  }
  let deviceFd: number;
  try {
    deviceFd = c.exportFd();
  } catch (e) {
    if (c.owned) throw cudaError(e, 'exporting device memory to send it');
    throw new CudaNotForwardableError(
      `This CUDA tensor was received from another process and the driver refused to export it again (${(e as Error).message}): send a clone() of it instead.`,
    );
  }
  const headerFd = c.header.fd;
  if (headerFd === null)
    throw new CudaNotForwardableError('This CUDA tensor kept no header descriptor to pass on: send a clone() of it instead.');
  for (let i = 0; i < copies; i++) c.header.retain();
  return {
    deviceFd,
    headerFd,
    offset: lease.offset,
    chunkBytes: c.bytes,
    undo: () => {
      for (let i = 0; i < copies; i++) c.header.releaseInFlight();
    },
  };
}

/**
 * The lease for a received CUDA storage. Takes both descriptors (closes them or keeps the
 * header's for passing on). A handle that does not fit its chunk is a BadHandleError; a
 * device this process does not see, CudaDeviceNotVisibleError.
 */
export function importChunk(deviceFd: number, headerFd: number, offset: number, nbytes: number, chunkBytes: number): DeviceBacking {
  let dfd: number | null = deviceFd;
  let hfd: number | null = headerFd;
  const closeLeft = (): void => {
    if (dfd !== null) addon.close(dfd);
    if (hfd !== null) addon.close(hfd);
    dfd = hfd = null;
  };
  try {
    requireCuda('A received CUDA tensor');
    if (offset + nbytes > chunkBytes)
      throw new BadHandleError(`A CUDA handle claims bytes ${offset} to ${offset + nbytes} of a ${chunkBytes}-byte chunk.`);
    const id = fdIdentity(headerFd);
    const known = chunks.get(id.key);
    if (known !== undefined && !known.dropped) {
      // Held here already (sent back to its owner, or received twice): the message's
      // reference is not needed, and the mapping is reused.
      known.header.releaseInFlight();
      if (offset + nbytes > known.bytes)
        throw new BadHandleError(`A CUDA handle claims bytes up to ${offset + nbytes} of a ${known.bytes}-byte chunk.`);
      closeLeft();
      relend(known);
      return new ChunkLease(known, offset, nbytes);
    }
    hfd = null; // openFd takes it (kept: a receiver may pass the tensor on)
    const header = Segment.openFd(headerFd, META_BYTES, true, id);
    let meta: ReturnType<typeof readMeta>;
    let index: number;
    try {
      meta = readMeta(header);
      if (meta.bytes !== chunkBytes)
        throw new BadHandleError(`A CUDA handle says its chunk holds ${chunkBytes} bytes; its header says ${meta.bytes}.`);
      index = deviceByUuid(meta.uuid);
      if (index < 0) {
        throw new CudaDeviceNotVisibleError(
          `A received CUDA tensor lives on the device with UUID ${meta.uuid}, which this process does not see (CUDA_VISIBLE_DEVICES?). Make that device visible, or send it as a CPU tensor (await t.to('cpu')).`,
        );
      }
    } catch (e) {
      header.releaseInFlight();
      header.unmap();
      throw e;
    }
    let hp: [bigint, bigint];
    try {
      hp = addon.cudaChunkImport(index, deviceFd, meta.bytes);
    } catch (e) {
      header.releaseInFlight();
      header.unmap();
      throw new BadHandleError(`A received CUDA descriptor could not be imported: ${cudaError(e, 'importing device memory').message}`);
    }
    header.adoptInFlight();
    const c = new Chunk(index, meta.bytes, hp[0], hp[1], header, false);
    c.leases = 1;
    chunks.set(c.key, c);
    return new ChunkLease(c, offset, nbytes);
  } finally {
    closeLeft();
  }
}
