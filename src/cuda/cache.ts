// The chunks of this process: the owner's cache of device allocations (free by size, and the
// bounded busy list of those others still hold: torch's "limbo", bounded), and every chunk
// mapped here by its header's identity, so that one received twice, or received back by its
// owner, is mapped once. NOTE [CUDA chunk lifetime] (chunk.ts) gives the rules.
import { addon } from '../native/index.js';
import { envNumber } from '../env.js';
import { CudaIpcUnsupportedError, CudaOutOfMemoryError } from '../errors.js';
import { Segment, holders, reclaimSlots, isAlive } from '../sharing/index.js';
import { Chunk, META_BYTES, writeMeta } from './chunk.js';
import { cudaError, deviceInfo } from './driver.js';

const cacheBytes = (): number => envNumber('TENSORPROC_CUDA_CACHE_BYTES') ?? 2 ** 31;
const busyBound = (): number => envNumber('TENSORPROC_CUDA_BUSY', (n) => n >= 1) ?? 256;

/** Chunks mapped in this process (owned or received), by header key. */
export const chunks = new Map<string, Chunk>();
/** Owned chunks no storage here uses and no other process holds: reusable, newest last. */
const free: Chunk[] = [];
/** Owned chunks no storage here uses but others hold, oldest first. */
const busy: Chunk[] = [];
let freeBytes = 0;

export function cacheStats(): { chunks: number; free: number; freeBytes: number; busy: number } {
  return { chunks: chunks.size, free: free.length, freeBytes, busy: busy.length };
}

function roundUp(n: number, g: number): number {
  return Math.max(g, Math.ceil(n / g) * g);
}

/** A chunk of at least `nbytes` on device `index`, leased: reused when one is free, else made. */
export function takeChunk(index: number, nbytes: number): Chunk {
  const info = deviceInfo(index);
  const size = roundUp(nbytes, info.granularity);
  const reused = reuse(index, size) ?? (reclaimDead() ? reuse(index, size) : null);
  if (reused !== null) {
    reused.leases++;
    return reused;
  }
  let made: Chunk;
  try {
    made = makeChunk(index, size);
  } catch (e) {
    if (!(e instanceof CudaOutOfMemoryError)) throw e;
    emptyCudaCache(); // once, as torch's caching allocator does before it gives up
    made = makeChunk(index, size);
  }
  made.leases = 1;
  return made;
}

function reuse(index: number, size: number): Chunk | null {
  settleBusy();
  for (let i = free.length - 1; i >= 0; i--) {
    const c = free[i]!;
    if (c.index === index && c.bytes === size) {
      free.splice(i, 1);
      freeBytes -= c.bytes;
      return c;
    }
  }
  return null;
}

function makeChunk(index: number, size: number): Chunk {
  const info = deviceInfo(index);
  if (!info.canShare) {
    throw new CudaIpcUnsupportedError(
      `Device cuda:${index} (${info.name}) has no virtual memory management with POSIX descriptor handles, which tensorproc's CUDA tensors need.`,
    );
  }
  const header = Segment.create('file_descriptor', META_BYTES);
  let hp: [bigint, bigint];
  try {
    hp = addon.cudaChunkCreate(index, size);
  } catch (e) {
    header.drop();
    throw cudaError(e, `allocating ${size} bytes on cuda:${index}`);
  }
  writeMeta(header, { uuid: info.uuid, bytes: size, ownerPid: process.pid });
  const c = new Chunk(index, size, hp[0], hp[1], header, true);
  chunks.set(c.key, c);
  return c;
}

/** A lease on `c` ended: the last one sends an owned chunk to its cache, drops a received one. */
export function endLease(c: Chunk): void {
  if (--c.leases > 0 || c.dropped) return;
  if (!c.owned) {
    forget(c);
    c.drop();
    return;
  }
  if (c.header.refcount() === 1) toFree(c);
  else {
    busy.push(c);
    // Past the bound the oldest is let go: its holders keep the memory alive (NOTE [CUDA chunk lifetime]).
    while (busy.length > busyBound()) {
      const old = busy.shift()!;
      forget(old);
      old.drop();
    }
  }
}

/** A chunk this process holds again (received back): off the busy or free list. */
export function relend(c: Chunk): void {
  c.leases++;
  if (c.leases !== 1 || !c.owned) return;
  let i = busy.indexOf(c);
  if (i >= 0) busy.splice(i, 1);
  i = free.indexOf(c);
  if (i >= 0) {
    free.splice(i, 1);
    freeBytes -= c.bytes;
  }
}

function toFree(c: Chunk): void {
  free.push(c);
  freeBytes += c.bytes;
  while (freeBytes > cacheBytes() && free.length > 0) {
    const old = free.shift()!;
    freeBytes -= old.bytes;
    forget(old);
    old.drop();
  }
}

function forget(c: Chunk): void {
  if (chunks.get(c.key) === c) chunks.delete(c.key);
}

/** Busy chunks back to a total of 1 go to the free list. */
function settleBusy(): void {
  for (let i = 0; i < busy.length; ) {
    const c = busy[i]!;
    if (c.header.refcount() === 1) {
      busy.splice(i, 1);
      toFree(c);
    } else i++;
  }
}

/** Takes back what dead holders of busy chunks held (NOTE [Dead holders]); true if any came back. */
function reclaimDead(): boolean {
  let took = 0;
  for (const c of busy) {
    for (const [pid] of holders(c.header.header)) if (pid !== process.pid && !isAlive(pid)) took += reclaimSlots(c.header.header, pid);
  }
  if (took > 0) settleBusy();
  return took > 0;
}

/**
 * Gives back every free chunk of this process's cache, and lets go of the busy ones (their
 * holders keep them alive): torch.cuda.empty_cache(). Tensors in use keep working.
 */
export function emptyCudaCache(): void {
  reclaimDead();
  settleBusy();
  for (const c of [...free, ...busy]) {
    forget(c);
    c.drop();
  }
  free.length = 0;
  busy.length = 0;
  freeBytes = 0;
}
