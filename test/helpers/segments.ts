// The shared segment behind a tensor, for tests that look at its refcount, name or header.
import type { Tensor } from '../../src/index.js';
import type { Lease, Segment } from '../../src/sharing/index.js';

/** The segment of a shared tensor's storage (a TypeError for a tensor in private memory). */
export function segmentOf(t: Tensor): Segment {
  const lease = t.storage.backing as Lease | null;
  if (lease === null) throw new TypeError('segmentOf(): the tensor is not in shared memory');
  return lease.segment;
}
