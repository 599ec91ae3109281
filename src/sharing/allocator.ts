// Shared allocation for this process: installs the allocator of NOTE [Shared allocation]
// (src/tensor/storage.ts) and tracks the segments this process holds.
import { addon } from '../native/index.js';
import { setSharedAllocator, type SharedBacking } from '../tensor/index.js';
import { SegmentCache } from './segment-cache.js';
import { ReceiveCache } from './receive-cache.js';
import type { Segment } from './segment.js';

export const cache = new SegmentCache();
export const received = new ReceiveCache();

/** Segments with a live lease in this process, owned or received. */
const live = new Set<Segment>();

interface LeaseState {
  readonly segment: Segment;
  readonly owned: boolean;
  ended: boolean;
}

// When the garbage collector drops a lease's buffer (every view over it gone) without a
// release(), the segment is recycled all the same. The held value must not reference the
// buffer, or the buffer could never be collected.
const finalizer = new FinalizationRegistry<LeaseState>((state) => endLease(state));

function endLease(state: LeaseState): void {
  if (state.ended) return;
  state.ended = true;
  live.delete(state.segment);
  if (state.owned) {
    cache.give(state.segment);
  } else {
    state.segment.unref();
    received.park(state.segment);
  }
}

/** One lease on a segment: see NOTE [Shared allocation]. */
export class Lease implements SharedBacking {
  readonly buffer: ArrayBuffer;
  readonly #state: LeaseState;

  constructor(segment: Segment, nbytes: number, owned: boolean) {
    this.buffer = segment.lease(nbytes);
    this.#state = { segment, owned, ended: false };
    live.add(segment);
    finalizer.register(this.buffer, this.#state, this);
  }

  get segment(): Segment {
    return this.#state.segment;
  }

  release(): void {
    if (this.#state.ended) return;
    finalizer.unregister(this);
    // Detach first: any view the user kept is emptied before the segment can be reused.
    addon.detach(this.buffer);
    endLease(this.#state);
  }
}

setSharedAllocator((nbytes) => new Lease(cache.acquire(nbytes), nbytes, true));

// At exit this process lets go of everything, so that the last holder of a named segment
// removes its name (NOTE [Segment lifetime]). Killed processes are the manager's job.
process.on('exit', () => {
  for (const seg of live) seg.drop();
  live.clear();
  cache.clear();
  received.clear();
});

/**
 * Gives back the shared memory this process keeps for reuse: free segments of its cache and
 * parked mappings of received ones (like torch.cuda.empty_cache()). Tensors in use are not
 * affected.
 */
export function emptyCache(): void {
  cache.clear();
  received.clear();
}
