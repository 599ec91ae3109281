// Small shared storages packed into slab segments: NOTE [Packed small storages].
//
// NOTE [Packed small storages]
// Every segment a process maps is one memory mapping, and a process gets about 65,000 of
// them (NOTE [Mapping budget]): one segment per storage let a receiver hold only ~60,000
// received tensors however small. So a shared allocation of at most PACK_BYTES takes a
// piece of this thread's open slab instead, a segment of SLAB_BYTES (64 KiB with its header)
// cut by a bump pointer into pieces aligned to 64 bytes (a cache line: no two pieces share
// one). The segment-level machinery is unchanged: the header's refcount still counts
// processes that hold the segment (a process holds it while any piece of it is alive there,
// Segment.leased counting its leases), reference slots, the manager, kept descriptors and
// both caches work per segment, and a receiver maps a slab once whatever the number of
// pieces it holds (handle.ts: a piece of a segment it holds already adopts no reference).
// A handle carries the piece's byte offset; a storage's identity is (segment, offset).
//  - A full slab is closed and a new one opened. A closed slab goes back to the segment
//    cache when the last lease on it in this process ends, and is then a segment like any
//    other: reused whole (as a slab again, or for a storage of its class) only at refcount
//    1 with no buffer of it alive (NOTE [Segment recycling], NOTE [Moved buffers]).
//  - No piece is ever reused on its own: nothing another process still reads can be
//    overwritten, and no per-piece bookkeeping crosses processes. The cost: one long-lived
//    small tensor pins its whole slab (64 KiB) in every process that holds it, here and in
//    its receivers; at most SLAB_BYTES / 64 pieces share that cost.
//  - The open slab stays open while empty (a stream of small tensors goes on in it); the
//    housekeeping timer gives back one left empty and idle (closeIdle), emptyCache() and
//    the exit close it.
//  - A piece's buffer covers exactly its bytes, so a user holding it (`t.data`,
//    storage.buffer) cannot reach a neighbour.
// PACK_BYTES is 512 (TENSORPROC_PACK_BYTES, at most 4 KiB): below the yardstick's smallest
// message (W1, 1 KiB), which a segment of its own serves as fast.
//
// NOTE [Piece buffers]
// Making a piece's ArrayBuffer and detaching it are native calls, and one FinalizationRegistry
// entry each: per message, that cost small tensors (W1 at 256 B) a third of their rate. So a
// piece buffer that no user saw (release() of a storage whose buffer never reached user code,
// as NOTE [Shared allocation]) is kept with its segment by byte offset (Segment.pieceSpares,
// allocator.ts), and the next lease of that many bytes there takes it: the sender's when the
// slab is reused, the receiver's while it keeps the mapping (held or parked). Only such a
// buffer is kept: one the user saw is detached at release, one moved away or collected is
// never kept, so nothing the user holds is handed out again. Kept buffers are not counted
// by Segment.liveBuffers() (a slab is reused once no *other* buffer of it is alive: NOTE
// [Moved buffers]) and are detached when the segment is unmapped; a slab reused whole for
// one storage drops them.
//
// A spill (VALUE frame over 64 KiB, frame.ts) is never a piece: its handle carries no offset.
import { getSharingStrategy, type SharingStrategy } from './strategy.js';
import type { Segment } from './segment.js';
import type { SegmentCache, CacheEntry, SpareLike } from './segment-cache.js';
import { addon } from '../native/index.js';
import { HEADER_BYTES } from './segment-header.js';
import { ENV, envNumber } from '../env.js';

export const PACK_BYTES = Math.min(
  envNumber('TENSORPROC_PACK_BYTES', (n) => Number.isSafeInteger(n) && n >= 0) ?? ENV.TENSORPROC_PACK_BYTES.default,
  4096,
);
/** A slab's data capacity: 64 KiB with its header, a size class of its own (size-class.ts). */
export const SLAB_BYTES = 64 * 1024 - HEADER_BYTES;
/** Pieces start at multiples of a cache line; TENSOR frames carry an offset in these units (frame.ts). */
export const PIECE_ALIGN = 64;
const ALIGN = PIECE_ALIGN;

/** Whether an allocation of `nbytes` is packed (empty storages keep a segment of their own, as before). */
export function packed(nbytes: number): boolean {
  return nbytes > 0 && nbytes <= PACK_BYTES;
}

interface OpenSlab {
  readonly segment: Segment;
  top: number;
  /** Its memory is still the kernel's zeros (made for this slab). */
  readonly fresh: boolean;
  /** Housekeeping ticks it has been seen with no live piece. */
  idle: number;
}

export class Slabs<S extends SpareLike> {
  readonly #cache: SegmentCache<S>;
  readonly #open: Record<SharingStrategy, OpenSlab | null> = { file_descriptor: null, file_system: null };
  /** Slabs made or taken from the cache (tests). */
  opened = 0;

  constructor(cache: SegmentCache<S>) {
    this.#cache = cache;
  }

  /** A piece of `nbytes` (packed(nbytes)): its segment, byte offset, and whether it is zeros. */
  take(nbytes: number): { segment: Segment; offset: number; zeroed: boolean } {
    const strategy = getSharingStrategy();
    let slab = this.#open[strategy];
    const size = Math.ceil(nbytes / ALIGN) * ALIGN;
    if (slab === null || slab.top + size > slab.segment.capacity || slab.segment.unmapped) {
      if (slab !== null) this.#close(strategy);
      const entry: CacheEntry<S> = this.#cache.acquire(SLAB_BYTES, strategy);
      if (entry.spare !== null) addon.detach(entry.spare.buffer); // a whole storage's buffer: no piece will match it
      entry.segment.openSlab = true;
      slab = this.#open[strategy] = { segment: entry.segment, top: 0, fresh: entry.fresh === true, idle: 0 };
      this.opened++;
    }
    const offset = slab.top;
    slab.top += size;
    slab.idle = 0;
    return { segment: slab.segment, offset, zeroed: slab.fresh };
  }

  /** The open slab of `strategy` takes no more pieces; one with none alive goes back to the cache now. */
  #close(strategy: SharingStrategy): void {
    const slab = this.#open[strategy]!;
    this.#open[strategy] = null;
    const seg = slab.segment;
    seg.openSlab = false;
    if (seg.leased === 0 && !seg.unmapped) {
      seg.outlived = false; // checked below: a piece whose buffer moved keeps it out of reuse
      this.#cache.give(seg, null, true);
    }
  }

  /** Closes the open slabs (emptyCache(), exit): those with no live piece go to the cache. */
  closeAll(): void {
    for (const strategy of ['file_descriptor', 'file_system'] as const) if (this.#open[strategy] !== null) this.#close(strategy);
  }

  /** Housekeeping: an open slab with no live piece for two ticks is closed. True while any slab is open. */
  closeIdle(): boolean {
    let open = false;
    for (const strategy of ['file_descriptor', 'file_system'] as const) {
      const slab = this.#open[strategy];
      if (slab === null) continue;
      if (slab.segment.leased === 0 && ++slab.idle > 2) this.#close(strategy);
      else open = true;
    }
    return open;
  }
}
