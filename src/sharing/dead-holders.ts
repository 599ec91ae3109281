// Taking back what dead holders of busy segments held (NOTE [Dead holders]), for the owner's
// cache (segment-cache.ts), at each housekeeping tick.
//
// NOTE [Dead holders]
// A segment sent to a process that is then killed holding it stays referenced in its header
// for good: on the busy list here, with its descriptor and mapping, forever (a memfd) or until
// this process exits (a named segment, whose holder may not have registered with the manager
// yet). So housekeeping() looks at the holders recorded in the slots of busy segments (NOTE
// [Reference slots]) and takes back what dead ones held; a segment that comes back free is
// reused or trimmed like any other. What it cannot see is a reference in flight whose message
// is lost (in the queue of a consumer killed between taking a datagram and adopting it, or
// in a socket closed everywhere): a busy segment held by nothing but messages in flight for
// IN_FLIGHT_ONLY_TICKS (a minute) is let go, which only gives up recycling it (its memory
// stays while anything maps it, and its last holder frees it).
//
import { holders, reclaimSlots } from './segment-header.js';
import { isAlive } from './liveness.js';
import { dropEntry, type CacheEntry } from './cache-entry.js';
import type { SpareLike } from './segment.js';

/**
 * Takes back what dead holders of the `busy` segments held, and lets go of those held only by
 * messages in flight for more than `inFlightOnlyTicks` housekeeping ticks; filters `busy` in
 * place. `changed`: some came back; `took`: references taken back.
 */
export function reclaimDeadHolders<S extends SpareLike>(
  busy: CacheEntry<S>[],
  tick: number,
  inFlightOnlyTicks: number,
): { changed: boolean; took: number } {
  const me = process.pid;
  const alive = new Map<number, boolean>();
  let changed = false;
  let kept = 0;
  let reclaimed = 0;
  for (let i = 0; i < busy.length; i++) {
    const entry = busy[i]!;
    const h = entry.segment.header;
    let inSlots = 0;
    for (const [pid, count] of holders(h)) {
      if (count === 0) continue;
      if (pid !== me) {
        let live = alive.get(pid);
        if (live === undefined) alive.set(pid, (live = isAlive(pid)));
        if (!live) {
          const took = reclaimSlots(h, pid);
          reclaimed += took;
          if (took > 0) changed = true;
          continue;
        }
      }
      inSlots += count;
    }
    // Held by this cache alone (its one hold, in our slot) and by messages in flight.
    if (inSlots <= 1 && entry.segment.refcount() > 1) {
      entry.tick ??= tick;
      if (tick - entry.tick > inFlightOnlyTicks) {
        dropEntry(entry);
        continue;
      }
    } else {
      entry.tick = undefined;
    }
    busy[kept++] = entry;
  }
  busy.length = kept;
  return { changed, took: reclaimed };
}
