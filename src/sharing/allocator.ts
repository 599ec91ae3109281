// Shared allocation for this process: installs the allocator of NOTE [Shared allocation]
// (src/tensor/storage.ts) and tracks the segments this process holds.
import { onExit } from '../exit-hooks.js';
import { isMainThread } from 'node:worker_threads';
import { addon } from '../native/index.js';
import { setSharedAllocator, type SharedBacking } from '../tensor/index.js';
import { DECAY_TICKS, HOUSEKEEPING_MS, SegmentCache } from './segment-cache.js';
import { ReceiveCache } from './receive-cache.js';
import type { Segment } from './segment.js';
import { onShed, releaseReceived } from './descriptors.js';
import { onMappingsShort } from './mappings.js';
import { Slabs, packed } from './packing.js';
import { countHeld } from './memory-counters.js';
import { closeBinned, onBinned } from './witness-bin.js';

/** A lease buffer that never reached user code, and its state, kept for the next lease. */
export interface Spare {
  readonly buffer: ArrayBuffer;
  readonly state: LeaseState;
}

export const cache = new SegmentCache<Spare>();
export const received = new ReceiveCache<Spare>();
/** This thread's open slabs of packed small storages (NOTE [Packed small storages]). */
export const slabs = new Slabs<Spare>(cache);
onShed(() => cache.clear()); // NOTE [Kept descriptors]: free and busy segments go first
onMappingsShort(() => emptySegmentCaches()); // NOTE [Mapping budget]

// NOTE [Dead holders], NOTE [Cache decay] (segment-cache.ts): looked at while anything is
// cached or parked; the timer never keeps the process alive, and stops when all is empty.
let housekeepingTimer: NodeJS.Timeout | null = null;

function housekeeping(): void {
  closeBinned(); // NOTE [Witness bin]: an owner waits for these at most one tick more
  const open = slabs.closeIdle();
  cache.housekeeping();
  received.housekeeping(DECAY_TICKS);
  if (!open && cache.idle && received.size === 0 && housekeepingTimer !== null) {
    clearInterval(housekeepingTimer);
    housekeepingTimer = null;
  }
}

function wantHousekeeping(): void {
  if (housekeepingTimer === null) housekeepingTimer = setInterval(housekeeping, HOUSEKEEPING_MS).unref();
}
onBinned(wantHousekeeping);

// Segments that have had a lease in this process, for the exit cleanup (those with a live
// lease then drop their hold). A segment is listed once, not on every lease: a Set add and
// delete per allocation was the largest cost of a recycled allocation. Unmapped segments
// are pruned when the list has doubled.
const everLeased = new Set<Segment>();
let pruneAt = 1024;

function track(segment: Segment): void {
  segment.tracked = true;
  everLeased.add(segment);
  if (everLeased.size > pruneAt) {
    for (const s of everLeased) {
      if (s.unmapped) {
        everLeased.delete(s);
        s.tracked = false;
      }
    }
    pruneAt = Math.max(1024, everLeased.size * 2);
  }
}

interface LeaseState {
  readonly segment: Segment;
  readonly owned: boolean;
  /** Where its bytes start in the segment's data area (a piece of a slab: NOTE [Packed small storages]). */
  readonly offset: number;
  readonly nbytes: number;
  ended: boolean;
}

// NOTE [Lease buffers and the finalizer]
// When the garbage collector drops a lease's buffer (every view over it gone) without a
// release(), the segment is recycled all the same: the buffer is registered with this
// finalizer for its whole life, with its LeaseState as held value. The registry holds the
// state strongly, so nothing reachable from the state (its segment) may lead back to the
// buffer, or the buffer could never be collected. That is why a spare buffer (one that
// never reached user code, kept for the next lease: NOTE [Shared allocation]) is held by
// the cache entry of its segment, not by the segment: when the cache drops the entry, the
// buffer becomes garbage, and its finalizer finds `ended` set and does nothing.
//
// NOTE [Moved buffers]
// A user may move a lease's buffer to another thread before releasing (postMessage or
// structuredClone with `transfer`): the buffer here is then detached, and the memory lives
// on over there, unseen by release(). A segment is therefore reused only once no buffer of
// an ended lease is alive anywhere (Segment.liveBuffers(), counted by the addon); until
// then it waits on the cache's busy list. A received segment whose buffer moved keeps this
// process's hold (its producer must not reuse it) in `outliving` until no buffer of it is
// left, checked by a timer, by emptyCache() and at the thread's exit. The finalizer path
// cannot tell a moved buffer from one the collector has not swept yet: a received segment
// with a buffer still counted waits in `outliving` too, an owned one on the busy list.
const finalizer = new FinalizationRegistry<LeaseState>((state) => endLease(state, null, 'collected'));
const OUTLIVING_FIRST_MS = 20;
const OUTLIVING_LAST_MS = 10_000;

const outliving = new Set<Segment>();
// A collected buffer's memory is freed by V8 a little after its finalizer ran, so most
// segments put in `outliving` by the finalizer path are free again within moments: a timer
// looks again soon, then less and less often while some remain (moved buffers may live long).
let outlivingTimer: NodeJS.Timeout | null = null;

/** Gives back the received segments of `outliving` that no buffer uses any more. */
function checkOutliving(): void {
  for (const seg of outliving) {
    if (seg.unmapped) {
      outliving.delete(seg);
    } else if (seg.liveBuffers() === 0) {
      outliving.delete(seg);
      seg.outlived = false;
      seg.unref();
      releaseReceived(seg);
      received.park(seg, null);
    }
  }
}

function addOutliving(seg: Segment): void {
  outliving.add(seg);
  if (outlivingTimer !== null) return;
  let delay = OUTLIVING_FIRST_MS;
  const look = (): void => {
    checkOutliving();
    delay = Math.min(delay * 4, OUTLIVING_LAST_MS);
    outlivingTimer = outliving.size === 0 ? null : setTimeout(look, delay).unref();
  };
  outlivingTimer = setTimeout(look, delay).unref();
}

type LeaseEnd = 'kept' | 'detached' | 'collected' | 'moved';

function endLease(state: LeaseState, spare: Spare | null, how: LeaseEnd): void {
  if (state.ended) return;
  state.ended = true;
  const seg = state.segment;
  if (how === 'collected' || how === 'moved') seg.outlived = true;
  if (spare !== null && packed(state.nbytes)) {
    keepPiece(seg, spare); // NOTE [Piece buffers]
    spare = null;
  }
  // Other pieces of the segment are alive here (NOTE [Packed small storages]): this process
  // still holds it.
  if (--seg.leased === 0) countHeld(seg.capacity, -1); // mp.memoryStats()
  if (seg.leased > 0 || seg.openSlab) {
    if (spare !== null) addon.detach(spare.buffer); // not a piece's: nothing will ask for it
    if (housekeepingTimer === null && seg.leased === 0) wantHousekeeping(); // closeIdle()
    return;
  }
  if (housekeepingTimer === null) wantHousekeeping();
  const outlived = seg.outlived;
  if (outlived && spare !== null) {
    // An earlier lease's buffer may be alive (a piece of it moved): liveBuffers() decides,
    // and must not count this one.
    addon.detach(spare.buffer);
    spare = null;
  }
  if (!state.owned && outlived && seg.liveBuffers() > 0) {
    addOutliving(seg); // NOTE [Moved buffers]: it stays outlived until checkOutliving() finds no buffer
    return;
  }
  seg.outlived = false;
  if (state.owned) {
    cache.give(seg, spare, outlived);
  } else {
    seg.unref();
    releaseReceived(seg);
    received.park(seg, spare);
  }
}

/** Keeps a piece's buffer that no user saw with its segment, for the next lease there (NOTE [Piece buffers]). */
function keepPiece(seg: Segment, spare: Spare): void {
  if (seg.unmapped) {
    addon.detach(spare.buffer);
    return;
  }
  const spares = (seg.pieceSpares ??= new Map());
  const old = spares.get(spare.state.offset);
  if (old !== undefined) addon.detach(old.buffer);
  spares.set(spare.state.offset, spare);
}

/** One lease on a segment: see NOTE [Shared allocation]. */
export class Lease implements SharedBacking {
  readonly buffer: ArrayBuffer;
  /** Its memory is known to be zeros (a segment made for it): zeros() need not write it. */
  zeroed = false;
  readonly #state: LeaseState;

  /** A lease of `nbytes` from `offset` on a segment, reusing the spare buffer its last lease left if it fits. */
  constructor(segment: Segment, offset: number, nbytes: number, owned: boolean, spare: Spare | null = null) {
    const pieces = segment.pieceSpares; // NOTE [Piece buffers]
    if (spare === null && pieces !== null) {
      // Only keepPiece() below fills the map, with Spares.
      spare = (pieces.get(offset) as Spare | undefined) ?? null;
      if (spare !== null) pieces.delete(offset);
    }
    if (spare !== null && spare.buffer.byteLength === nbytes && spare.state.offset === offset && spare.state.owned === owned) {
      this.buffer = spare.buffer;
      this.#state = spare.state;
      this.#state.ended = false;
    } else {
      if (spare !== null) addon.detach(spare.buffer); // no user saw it: nothing keeps it alive (NOTE [Moved buffers])
      this.buffer = segment.lease(nbytes, offset);
      this.#state = { segment, owned, offset, nbytes, ended: false };
      finalizer.register(this.buffer, this.#state, this.#state);
    }
    if (segment.leased++ === 0) countHeld(segment.capacity, 1); // mp.memoryStats()
    if (!segment.tracked) track(segment);
  }

  get segment(): Segment {
    return this.#state.segment;
  }

  /** Where its bytes start in the segment's data area. */
  get offset(): number {
    return this.#state.offset;
  }

  release(escaped: boolean): void {
    const state = this.#state;
    if (state.ended) return;
    if (escaped) {
      finalizer.unregister(state);
      // Already detached and not empty: the user moved it away (NOTE [Moved buffers]).
      const moved = this.buffer.byteLength === 0 && state.nbytes > 0;
      // Detach first: any view the user kept is emptied before the segment can be reused.
      if (!moved) addon.detach(this.buffer);
      endLease(state, null, moved ? 'moved' : 'detached');
    } else {
      endLease(state, { buffer: this.buffer, state }, 'kept');
    }
  }
}

setSharedAllocator((nbytes) => {
  if (packed(nbytes)) {
    const piece = slabs.take(nbytes); // NOTE [Packed small storages]
    const lease = new Lease(piece.segment, piece.offset, nbytes, true);
    if (piece.zeroed) lease.zeroed = true;
    return lease;
  }
  const entry = cache.acquire(nbytes);
  entry.segment.dropPieceSpares(); // a slab once, now one storage's (NOTE [Piece buffers])
  const lease = new Lease(entry.segment, 0, nbytes, true, entry.spare);
  if (entry.fresh === true) lease.zeroed = true;
  return lease;
});

// At exit this process lets go of everything, so that the last holder of a named segment
// removes its name (NOTE [Segment lifetime]). Killed processes are the manager's job.
onExit(() => {
  slabs.closeAll(); // an empty open slab goes to the cache, cleared below
  for (const seg of everLeased) if (seg.leased > 0) seg.drop();
  everLeased.clear();
  // What no buffer uses any more goes back now. A worker thread's moved buffers may live on
  // in another thread of this process, and its hold stays with them (known gap: until the
  // process exits); at the process's exit nothing is left to use them.
  checkOutliving();
  if (isMainThread) for (const seg of outliving) seg.drop();
  outliving.clear();
  cache.clear();
  received.clear();
});

/** Drops the free segments of the cache and the parked mappings (see emptyCache in handle.ts). */
export function emptySegmentCaches(): void {
  checkOutliving();
  slabs.closeAll();
  cache.clear();
  received.clear();
}
