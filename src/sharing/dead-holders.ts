// Taking back what dead holders of busy segments held (NOTE [Dead holders]), for the owner's
// cache (segment-cache.ts), at each housekeeping tick.
//
// NOTE [Dead holders]
// A segment sent to a process that is then killed holding it stays referenced in its header
// for good: on the busy list here, with its descriptor and mapping, forever (a memfd) or until
// this process exits (a named segment, whose holder may not have registered with the manager
// yet). So housekeeping() looks at the holders recorded in the slots of busy segments (NOTE
// [Reference slots]) and takes back what dead ones held; a segment that comes back free is
// reused or trimmed like any other. A reference in flight whose message is lost (taken by a
// consumer killed before it recorded it, or in a socket closed everywhere) is in no slot: for
// a memfd, the kernel tells when no descriptor the segment sent is left anywhere, and what the
// live slots do not account for is then taken back (NOTE [Orphans in flight], in-flight.ts).
// A named segment's messages carry a witness instead (NOTE [Witnesses of named segments]),
// except those of processes that pass it on: one of those held by nothing but messages in
// flight for IN_FLIGHT_ONLY_TICKS (a minute) is let go, which only gives up recycling it (its
// memory stays while anything maps it, and its last holder frees it).
//
import { holders, reclaimSlots, SLOTS } from './segment-header.js';
import { isAlive } from './liveness.js';
import { dropEntry, type CacheEntry } from './cache-entry.js';
import type { SpareLike } from './segment.js';
import { settleInFlight } from './in-flight.js';

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
    const slots = holders(h);
    for (const [pid, count] of slots) {
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
    // References no live slot accounts for: in flight, or lost with their message (NOTE
    // [Orphans in flight]).
    const refs = entry.segment.refcount();
    // (Not when every slot is taken: a holder may then hold by the total alone.)
    if (refs > inSlots && inSlots > 0 && slots.length < SLOTS) {
      const took = settleInFlight(entry, refs, inSlots);
      if (took > 0) {
        reclaimed += took;
        changed = true;
      }
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
