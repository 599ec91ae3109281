// A chunk: one device allocation (cuMemCreate, exportable as a POSIX descriptor) as mapped in
// this process, paired with a one-page header segment that carries its reference slots.
//
// NOTE [CUDA chunk lifetime]
// Device memory travels as two descriptors: the allocation's exported descriptor (which the
// driver counts as a reference to the memory, like a memfd's) and the descriptor of a small
// memfd header whose reference slots (NOTE [Reference slots]) count holders exactly as a CPU
// segment's do: the sender adds the receiver's reference before sending, the receiver adopts
// it, a released lease drops it, and a killed holder's slot is taken back by the owner. The
// driver frees the memory only when every handle, mapping and exported descriptor of it, in
// every process, is gone, so:
//  - a producer may exit or be killed while consumers hold its tensors (their import and
//    mapping are references): torch's "keep the producer alive" is not needed;
//  - a message in flight keeps its memory (its descriptor is a reference);
//  - a receiver may pass a tensor on: it re-exports the handle it imported (one descriptor,
//    made once per chunk) and sends its header descriptor, which it keeps;
//  - the owner's cache reuses a chunk only when its header's total is back to 1 (only the
//    cache holds it), and may let go of a chunk others still hold (the bounded busy list):
//    the holders keep the memory alive, and the last one frees it.
// These are the driver's documented rules; the stand-in driver the tests use
// (test/cuda/fixtures/fakecuda.c) implements them, and the device script (.gpu/) checks the
// real driver agrees (docs/cuda.md, "What is verified where").
import { addon } from '../native/index.js';
import { BadHandleError } from '../errors.js';
import type { Segment } from '../sharing/index.js';
import { cudaError } from './driver.js';

/** Bytes of a header's data area: magic, device UUID, chunk size, owner pid. */
export const META_BYTES = 64;
const MAGIC = 0x55435054; // "TPCU"

export interface ChunkMeta {
  readonly uuid: string;
  readonly bytes: number;
  readonly ownerPid: number;
}

export function writeMeta(header: Segment, meta: ChunkMeta): void {
  const ab = header.lease(META_BYTES);
  const v = new DataView(ab);
  v.setUint32(0, MAGIC, true);
  for (let i = 0; i < 16; i++) v.setUint8(4 + i, Number.parseInt(meta.uuid.slice(2 * i, 2 * i + 2), 16));
  v.setFloat64(24, meta.bytes, true);
  v.setInt32(32, meta.ownerPid, true);
  addon.detach(ab); // no buffer may outlive this: the segment's unmap evicts at once (NOTE [Mapping lifetime])
}

export function readMeta(header: Segment): ChunkMeta {
  const ab = header.lease(META_BYTES);
  try {
    const v = new DataView(ab);
    if (v.getUint32(0, true) !== MAGIC) throw new BadHandleError('A received CUDA header is not a tensorproc chunk header.');
    let uuid = '';
    for (let i = 0; i < 16; i++)
      uuid += v
        .getUint8(4 + i)
        .toString(16)
        .padStart(2, '0');
    const bytes = v.getFloat64(24, true);
    if (!Number.isSafeInteger(bytes) || bytes <= 0) throw new BadHandleError('A received CUDA header claims an impossible size.');
    return { uuid, bytes, ownerPid: v.getInt32(32, true) };
  } finally {
    addon.detach(ab);
  }
}

export class Chunk {
  /** Storages over this chunk in this process. */
  leases = 0;
  #exportFd: number | null = null;
  #dropped = false;

  constructor(
    readonly index: number,
    readonly bytes: number,
    readonly handle: bigint,
    readonly ptr: bigint,
    readonly header: Segment,
    /** Made by this process (its cache's), not received. */
    readonly owned: boolean,
  ) {}

  get key(): string {
    return this.header.key;
  }
  get dropped(): boolean {
    return this.#dropped;
  }

  /**
   * The descriptor messages carry (borrowed by the transport): exported once per chunk and
   * kept. A received chunk re-exports the handle it imported (NOTE [CUDA chunk lifetime]).
   */
  exportFd(): number {
    if (this.#exportFd === null) this.#exportFd = addon.cudaChunkExport(this.index, this.handle);
    return this.#exportFd;
  }

  /**
   * This process lets go of the chunk: its mapping, handle and exported descriptor, and its
   * reference in the header. Other holders keep the memory alive.
   */
  drop(): void {
    if (this.#dropped) return;
    this.#dropped = true;
    if (this.#exportFd !== null) {
      addon.close(this.#exportFd);
      this.#exportFd = null;
    }
    try {
      addon.cudaChunkDrop(this.index, this.handle, this.ptr, this.bytes);
    } catch (e) {
      throw cudaError(e, 'giving back device memory');
    } finally {
      this.header.drop();
    }
  }
}
