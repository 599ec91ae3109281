// The header at the start of every segment: its layout, defined once, and the operations on
// its per-process reference slots. Segment (this process's side) and the file_system
// manager (manager/server.ts, which reclaims what dead processes held) both use
// it. See NOTE [Reference slots].
//
// NOTE [Reference slots]
// The header is one page, so tensor data starts page-aligned. Int32 words:
//   0 magic · 1 version · 2 total references · 3 creator pid · 4-5 capacity (lo, hi)
//   6 creator waiting for the total to fall (NOTE [Waiting for a segment], segment-wait.ts)
//   7 slots in use: no slot at or past it was ever claimed (0: not kept, by an older writer)
//   8 passed on by a process other than its owner since it was last free (named segments:
//     NOTE [Witnesses of named segments], witness.ts) · 9-15 reserved
//   16.. SLOTS slots of two words (pid, count).
// `total` is what NOTE [Segment lifetime] counts: holds by processes plus messages in
// flight. A process's hold is *also* recorded in its own slot (found by pid, claimed by a
// compare-and-swap of pid 0 -> mypid), so that when a process dies holding references, the
// manager can subtract exactly what it held, with no message per reference: it swaps the
// slot's pid to RECLAIMING (so nobody else matches it), takes its count, subtracts it from
// `total`, and frees the slot (pid 0). References in flight live in `total` only; nobody
// can tell whose they are, which is why the manager has a grace rule for them (NOTE [The
// file_system manager]); the owner of a memfd can tell when no message carrying it is left
// anywhere, and takes back what the slots do not account for then (NOTE [Orphans in flight]). Threads of one process share its slot (one pid): each thread's
// holds add to the same count, and the process's death releases all of them.
// Every holder keeps a slot, of a memfd too: a memfd's memory dies with its last holder, but
// its owner's cache sees it free only when the total falls to its own hold, and a consumer
// killed holding it would keep it busy there for good. So the owner, too, takes back what
// dead holders held (SegmentCache.reclaimDead()), as the manager does for named segments;
// both do it by the compare-and-swap above, so no slot is taken back twice.
// A live process never frees its slot, even at count 0: only the manager and the owner free
// slots, and only of dead processes, so a slot index cached by a Segment stays valid for the
// process's life and no two threads can race a free against a claim. A slot is claimed at
// the first free index (a process finds its own before any free one, unless slots freed since
// lie before it: it then claims one more, harmless, as everything sums a pid's slots), so
// slots stay packed and word 7 bounds every scan of them. When every slot is taken (more
// than SLOTS processes mapped the segment at once), a hold is counted in `total` only and a
// crash of that holder leaves it to the grace rule as if it were in flight.
// A process killed between the two steps of a release (its slot's count is lowered first,
// then `total`) leaves one reference that looks in flight; the order is deliberate: the
// other order would let the manager subtract that reference twice and free a segment still
// in use, while this one leaves only a name that the manager's crash grace removes.
// Known gap: a dead process's pid reused by a new process that maps the same segment before
// the manager has reclaimed the slot (milliseconds) would merge the two; the manager would
// then subtract the newcomer's hold too.

import { addon, type NativeMapping } from '../native/index.js';

export const HEADER_BYTES = 4096;
export const MAGIC = 0x47535054; // "TPSG" little-endian
export const VERSION = 2;
export const W_MAGIC = 0,
  W_VERSION = 1,
  W_REFS = 2,
  W_PID = 3,
  W_CAP_LO = 4,
  W_CAP_HI = 5,
  W_WAITING = 6,
  W_SLOTS_USED = 7,
  W_UNWITNESSED = 8;
const W_SLOTS = 16;
export const SLOTS = (HEADER_BYTES / 4 - W_SLOTS) / 2;
const RECLAIMING = -1;

/** Word index of the count of slot `i`; its pid is the word before. */
export function countWord(i: number): number {
  return W_SLOTS + 2 * i + 1;
}

/**
 * After the total was lowered to `left` (by a release here, or by the manager reclaiming a
 * dead holder's references): wakes the creator if it waits for its segment to come back
 * (NOTE [Waiting for a segment], word 6).
 */
export function wakeCreator(h: Int32Array, mapping: NativeMapping, left: number): void {
  if (left === 1 && Atomics.load(h, W_WAITING) !== 0) addon.futexWake(mapping, W_REFS * 4, 1);
}

/** Writes a fresh header with one hold, by `pid`, in slot 0. Magic last: readers check it. */
export function initHeader(h: Int32Array, pid: number, capacity: number): number {
  h[W_VERSION] = VERSION;
  h[W_PID] = pid;
  h[W_CAP_LO] = capacity % 2 ** 32;
  h[W_CAP_HI] = Math.floor(capacity / 2 ** 32);
  h[W_SLOTS] = pid;
  h[countWord(0)] = 1;
  h[W_SLOTS_USED] = 1;
  Atomics.store(h, W_REFS, 1);
  Atomics.store(h, W_MAGIC, MAGIC);
  return countWord(0);
}

/**
 * The count word of `pid`'s slot, claiming the first free slot if none of `pid` comes before
 * it; -1 if every slot is taken. Call once per mapping and keep the result (the slot stays
 * ours while we live).
 */
export function claimSlot(h: Int32Array, pid: number): number {
  for (let i = 0; i < SLOTS; i++) {
    const at = W_SLOTS + 2 * i;
    const p = Atomics.load(h, at);
    if (p === pid) return countWord(i);
    if (p !== 0) continue;
    // Counted in use before it is taken: a scan that reads word 7 then never misses it.
    for (let used = Atomics.load(h, W_SLOTS_USED); used < i + 1; ) {
      const seen = Atomics.compareExchange(h, W_SLOTS_USED, used, i + 1);
      if (seen === used) break;
      used = seen;
    }
    if (Atomics.compareExchange(h, at, 0, pid) === 0) return countWord(i);
    i--; // taken meanwhile: look at it again (it may be another thread of ours)
  }
  return -1;
}

/** Slots to scan: those ever claimed (all of them for a header that does not count them). */
function slotsUsed(h: Int32Array): number {
  const used = Atomics.load(h, W_SLOTS_USED);
  return used > 0 && used <= SLOTS ? used : SLOTS;
}

/** [pid, count] of every taken slot. */
export function holders(h: Int32Array): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0, n = slotsUsed(h); i < n; i++) {
    const pid = Atomics.load(h, W_SLOTS + 2 * i);
    if (pid > 0) out.push([pid, Atomics.load(h, countWord(i))]);
  }
  return out;
}

/**
 * For the manager or the owner, once `pid` is known dead: frees every slot of `pid` and
 * subtracts what they held from the total. Returns the count subtracted.
 */
export function reclaimSlots(h: Int32Array, pid: number): number {
  let took = 0;
  for (let i = 0, n = slotsUsed(h); i < n; i++) {
    const p = W_SLOTS + 2 * i;
    if (Atomics.load(h, p) !== pid || Atomics.compareExchange(h, p, pid, RECLAIMING) !== pid) continue;
    const count = Atomics.exchange(h, p + 1, 0);
    if (count > 0) {
      Atomics.sub(h, W_REFS, count);
      took += count;
    }
    Atomics.store(h, p, 0);
  }
  return took;
}
