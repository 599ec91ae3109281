// Counts behind mp.memoryStats() (memory-stats.ts): the segments this thread maps, made here
// or received, and those a live storage here holds, with their bytes. Kept as they change
// (an add per map, unmap, first lease and last lease), so that reading them costs nothing
// on any path. Per thread, as the caches they describe (module state).

/** Segments mapped in this thread now, by who made them, and their data bytes. */
export const counts = {
  madeSegments: 0,
  madeBytes: 0,
  /** Segments made here since this thread started. */
  madeTotal: 0,
  /** Own segments that keep a descriptor (file_descriptor memfds). */
  madeFds: 0,
  receivedSegments: 0,
  receivedBytes: 0,
  /** Segments of other processes mapped here since this thread started (a parked one taken again is not mapped again). */
  receivedTotal: 0,
  /** Segments with at least one live lease (storage) in this thread. */
  heldSegments: 0,
  heldBytes: 0,
};

/** A segment was mapped (segment.ts): made here (`owned`) or received. */
export function countMapped(owned: boolean, bytes: number, hasFd: boolean): void {
  if (owned) {
    counts.madeSegments++;
    counts.madeBytes += bytes;
    counts.madeTotal++;
    if (hasFd) counts.madeFds++;
  } else {
    counts.receivedSegments++;
    counts.receivedBytes += bytes;
    counts.receivedTotal++;
  }
}

/** A segment was unmapped (segment.ts); `hadFd`: an own one that kept its descriptor until now. */
export function countUnmapped(owned: boolean, bytes: number, hadFd: boolean): void {
  if (owned) {
    counts.madeSegments--;
    counts.madeBytes -= bytes;
    if (hadFd) counts.madeFds--;
  } else {
    counts.receivedSegments--;
    counts.receivedBytes -= bytes;
  }
}

/** A segment's first lease began (+1) or its last ended (-1) (allocator.ts). */
export function countHeld(bytes: number, delta: 1 | -1): void {
  counts.heldSegments += delta;
  counts.heldBytes += delta * bytes;
}
