// One entry of the segment caches (segment-cache.ts, receive-cache.ts, packing.ts' slabs):
// a segment and what its last lease left for the next one.
import { addon } from '../native/index.js';
import type { Segment, SpareLike } from './segment.js';

/** A cached segment, with whatever its last user left for the next one (a spare buffer). */
export interface CacheEntry<S> {
  readonly segment: Segment;
  readonly spare: S | null;
  /** Reuse only once no buffer of the ended lease is alive (NOTE [Moved buffers], allocator.ts). */
  readonly checkBuffers?: boolean;
  /** Made just now: its memory is still the kernel's zeros. */
  readonly fresh?: boolean;
  /** The housekeeping tick it became free at (free lists), or was first seen held only in flight (busy). */
  tick?: number;
}

/**
 * Gives up a cached entry: its spare buffer, which never reached user code, is detached
 * first, so that nothing but the header holds the mapping and the memory goes back at once
 * (Segment.unmap()).
 */
export function dropEntry(entry: CacheEntry<SpareLike>): void {
  if (entry.spare !== null) addon.detach(entry.spare.buffer);
  entry.segment.drop();
}
