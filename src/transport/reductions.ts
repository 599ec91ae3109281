// Reductions of storages and tensors (torch's reductions.py): a storage travels as the handle
// of its shared segment (moved into shared memory first if it is not there yet) plus, under
// file_descriptor, the segment's descriptor; a tensor travels as a reference to its storage
// entry plus dtype/shape/stride/offset. Storages are reduced once per message (see NOTE
// [Message table]), so views of one storage arrive over one storage, and importStorage()
// makes a storage this process already holds (sent back to it) the very same Storage.
import { Tensor, Storage } from '../tensor/index.js';
import { exportStorage, importStorage, abandonExport, type ExportedStorage, type StorageHandle } from '../sharing/index.js';
import { FrameDecodeError } from '../errors.js';
import { exportChunk, importChunk } from '../cuda/index.js';
import { registerReduction, type RebuildContext, type ReduceContext } from './registry.js';
import { addon } from '../native/index.js';

type StorageState = [strategy: string, name: string | null, offset: number, nbytes: number, fd: number];
/** A CUDA storage (NOTE [CUDA chunk lifetime]): where it lies in its chunk, and the chunk's two descriptors. */
type CudaState = [kind: 'cuda', offset: number, nbytes: number, chunkBytes: number, deviceFd: number, headerFd: number];

function reduceCuda(storage: Storage, ctx: ReduceContext): CudaState {
  const e = exportChunk(storage.deviceBacking!, ctx.copies);
  ctx.onAbandon(e.undo);
  return ['cuda', e.offset, storage.nbytes, e.chunkBytes, ctx.fd(e.deviceFd), ctx.fd(e.headerFd)];
}

function rebuildCuda(state: unknown[], ctx: RebuildContext): Storage {
  const [, offset, nbytes, chunkBytes, dfd, hfd] = state;
  const ok = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;
  if (state.length !== 6 || !ok(offset) || !ok(nbytes) || !ok(chunkBytes) || !ok(dfd) || !ok(hfd) || dfd === hfd) {
    throw new FrameDecodeError('A received CUDA storage entry is malformed.');
  }
  const deviceFd = ctx.takeFd(dfd);
  let headerFd: number;
  try {
    headerFd = ctx.takeFd(hfd);
  } catch (e) {
    addon.close(deviceFd);
    throw e;
  }
  return Storage.fromDevice(importChunk(deviceFd, headerFd, offset, nbytes, chunkBytes), nbytes);
}

const isCuda = (state: unknown): state is unknown[] => Array.isArray(state) && state[0] === 'cuda';
type TensorState = [storage: number, dtype: string, shape: number[], stride: number[], offset: number];

/** Checks a received layout before a Tensor is made of it (the constructor trusts its callers). */
export function checkTensorLayout(shape: unknown, stride: unknown, offset: unknown): void {
  if (
    !naturals(shape) ||
    !naturals(stride) ||
    (shape as number[]).length !== (stride as number[]).length ||
    !Number.isSafeInteger(offset) ||
    (offset as number) < 0
  ) {
    throw new FrameDecodeError('A received tensor has an invalid shape, stride or offset.');
  }
}

function naturals(a: unknown): boolean {
  if (!Array.isArray(a)) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    if (!Number.isSafeInteger(x) || x < 0) return false;
  }
  return true;
}

/**
 * exportStorage() for a message with `copies` receivers: each receiver adopts one
 * in-flight reference. Returns the undo.
 */
export function exportForCopies(storage: Storage, copies: number): { exported: ExportedStorage; undo: () => void } {
  const exported = exportStorage(storage);
  for (let i = 1; i < copies; i++) exported.segment.retain();
  return {
    exported,
    undo: () => {
      for (let i = 1; i < copies; i++) exported.segment.releaseInFlight();
      abandonExport(exported);
    },
  };
}

/**
 * A received storage handle, checked: the one check for every frame that carries one (lone
 * tensors, spills, the message table). A known strategy, a byte offset and count (checked
 * against the segment when it is mapped: handle.ts), a name under file_system; under
 * file_descriptor the name is only an identity hint (handle.ts) or null.
 */
export function checkHandle(strategy: unknown, name: unknown, offset: unknown, nbytes: unknown): StorageHandle {
  if (strategy !== 'file_descriptor' && strategy !== 'file_system')
    throw new FrameDecodeError(`A received storage names sharing strategy ${String(strategy)}.`);
  if (!Number.isSafeInteger(nbytes) || (nbytes as number) < 0)
    throw new FrameDecodeError(`A received storage handle claims ${String(nbytes)} bytes.`);
  if (!Number.isSafeInteger(offset) || (offset as number) < 0 || !Number.isSafeInteger((offset as number) + (nbytes as number))) {
    throw new FrameDecodeError(`A received storage handle claims byte offset ${String(offset)}.`);
  }
  if (name !== null && typeof name !== 'string') throw new FrameDecodeError('A received storage handle has a malformed name.');
  if (strategy === 'file_system' && name === null) throw new FrameDecodeError('A received file_system storage has no name.');
  return { strategy, name, offset: offset as number, nbytes: nbytes as number };
}

function storageHandle(state: unknown, ctx: RebuildContext): { handle: StorageHandle; fd: number | null; shared: boolean } {
  if (!Array.isArray(state) || state.length !== 5) throw new FrameDecodeError('A received storage entry is malformed.');
  const [strategy, name, offset, nbytes, fdIndex] = state as StorageState;
  const handle = checkHandle(strategy, name, offset, nbytes);
  const fd = handle.strategy === 'file_descriptor' ? ctx.takeSharedFd(fdIndex) : null;
  return { handle, fd, shared: handle.strategy === 'file_descriptor' && fd === null };
}

registerReduction<Storage>({
  name: 'storage',
  type: Storage,
  reduce(storage, ctx): StorageState | CudaState {
    if (storage.deviceBacking !== null) return reduceCuda(storage, ctx);
    const { exported, undo } = exportForCopies(storage, ctx.copies);
    ctx.onAbandon(undo);
    const { strategy, name, offset, nbytes } = exported.handle;
    return [strategy, name, offset, nbytes, exported.fd === null ? -1 : ctx.fd(exported.fd)];
  },
  rebuild(state, ctx) {
    if (isCuda(state)) return rebuildCuda(state, ctx);
    const { handle, fd, shared } = storageHandle(state, ctx);
    return importStorage(handle, fd, shared);
  },
  discard(state, ctx) {
    if (isCuda(state)) {
      rebuildCuda(state, ctx).release();
      return;
    }
    // Adopting the in-flight reference and dropping the storage gives it back (when collected).
    const { handle, fd, shared } = storageHandle(state, ctx);
    importStorage(handle, fd, shared);
  },
});

registerReduction<Tensor>({
  name: 'tensor',
  type: Tensor,
  reduce(t, ctx): TensorState {
    return [ctx.ref(t.storage), t.dtype, t.shape as number[], t.stride as number[], t.offset];
  },
  rebuild(state, ctx) {
    if (!Array.isArray(state) || state.length !== 5) throw new FrameDecodeError('A received tensor entry is malformed.');
    const [storage, dtype, shape, stride, offset] = state as TensorState;
    checkTensorLayout(shape, stride, offset);
    const s = ctx.get(storage);
    if (!(s instanceof Storage)) throw new FrameDecodeError('A received tensor does not refer to a storage.');
    return new Tensor(s, dtype as never, shape, stride, offset);
  },
});
