// The shared segment behind a tensor, for tests that look at its refcount, name or header.
import { readFileSync } from 'node:fs';
import type { Tensor } from '../../src/index.js';
import type { Lease, Segment } from '../../src/sharing/index.js';

/** The segment of a shared tensor's storage (a TypeError for a tensor in private memory). */
export function segmentOf(t: Tensor): Segment {
  const lease = t.storage.backing as Lease | null;
  if (lease === null) throw new TypeError('segmentOf(): the tensor is not in shared memory');
  return lease.segment;
}

/**
 * The tensorproc segments this process maps, from /proc/self/smaps: how many, bytes mapped,
 * bytes resident. A segment given up whose header is still referenced is private memory then
 * (addon.evict), not a mapping of the segment, and is not counted.
 */
export function segmentMemory(): { segments: number; mapped: number; resident: number } {
  let segments = 0;
  let mapped = 0;
  let resident = 0;
  let inSegment = false;
  for (const line of readFileSync('/proc/self/smaps', 'latin1').split('\n')) {
    const range = /^([0-9a-f]+)-([0-9a-f]+) /.exec(line);
    if (range !== null) {
      inSegment = /\/memfd:tensorproc \(deleted\)$|\/dev\/shm\/tensorproc_/.test(line);
      if (inSegment) {
        segments++;
        mapped += parseInt(range[2]!, 16) - parseInt(range[1]!, 16);
      }
    } else if (inSegment && line.startsWith('Rss:')) {
      resident += Number(/(\d+) kB/.exec(line)![1]) * 1024;
    }
  }
  return { segments, mapped, resident };
}
