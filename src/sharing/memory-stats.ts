// mp.memoryStats(): what this process (this thread: each worker thread has caches of its
// own) holds in shared memory, read from counters kept as segments come and go
// (memory-counters.ts) and from the caches' own sizes. Cheap enough for a hot loop: no
// system call, no walk over the segments.
import { cache, received } from './allocator.js';
import { keptCount } from './descriptors.js';
import { mappedSegments } from './mappings.js';
import { counts } from './memory-counters.js';

/** Segments and their data bytes (each segment also has a 4 KiB header page). */
export interface SegmentCount {
  readonly segments: number;
  readonly bytes: number;
}

export interface MemoryStats {
  /** Segments this process made and still maps (in use, held elsewhere, or cached); `total`: made since it started. */
  readonly made: SegmentCount & { readonly total: number };
  /** Segments a live storage (tensor, Value, Array…) of this process uses, made here or received. */
  readonly held: SegmentCount;
  /**
   * Own segments kept for reuse, ready now (`segments`, `bytes`), and `busy`: those whose last
   * storage here ended while another process (or a message in flight) still holds them.
   */
  readonly cached: SegmentCount & { readonly busy: number };
  /**
   * Segments of other processes mapped here, in use or `parked` (kept mapped for their next
   * arrival); `total`: mapped since this process started.
   */
  readonly received: SegmentCount & { readonly parked: number; readonly total: number };
  /** Descriptors of segments kept open: own memfds, and received ones kept to pass on (NOTE [Kept descriptors]). */
  readonly descriptors: number;
  /** Memory mappings of segments (made and received), what the mapping budget counts (NOTE [Mapping budget]). */
  readonly mappings: number;
}

/** A snapshot of this process's shared memory: see MemoryStats. */
export function memoryStats(): MemoryStats {
  return {
    made: { segments: counts.madeSegments, bytes: counts.madeBytes, total: counts.madeTotal },
    held: { segments: counts.heldSegments, bytes: counts.heldBytes },
    cached: { segments: cache.freeCount, bytes: cache.freeBytes, busy: cache.busyCount },
    received: {
      segments: counts.receivedSegments,
      bytes: counts.receivedBytes,
      parked: received.size,
      total: counts.receivedTotal,
    },
    descriptors: counts.madeFds + keptCount(),
    mappings: mappedSegments(),
  };
}
