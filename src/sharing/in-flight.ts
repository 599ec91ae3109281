// Taking back the references of messages that were lost in flight (NOTE [Orphans in flight]),
// for the owner's housekeeping of busy segments (dead-holders.ts): the probe of an owned
// memfd's sent description, and the settling of the total.
//
// NOTE [Orphans in flight]
// A reference in flight lives in the header's total only (NOTE [Reference slots]) from the
// sender's retain() until the receiver records it in its slot. A receiver SIGKILLed between
// taking the datagram off the socket and that record (decoding, an fstat, an mmap: a large
// share of a busy consumer's time) leaves a reference that no slot accounts for and that no
// death releases: the owner's cache then saw the segment busy until the one-minute rule let
// it go (NOTE [Dead holders]). The kernel knows better, under file_descriptor: every message
// carrying a memfd carries a descriptor of the owner's open file description of it (the one
// the owner sends from, which SCM_RIGHTS passes on as itself, as do receivers that pass the
// segment on with the descriptor they keep), and a receiver holds that descriptor from the
// moment it takes the datagram until after it has recorded the reference (or released it);
// a mapping made from it keeps the description open too. The owner sends from a description
// of its own, not the one it mapped (Segment.create), or its mapping would keep it open for
// good. A process's death closes its descriptors and mappings; a socket closed everywhere
// drops its messages'.
// So when a busy segment's total exceeds what the live holders' slots account for:
//  1. the owner puts a read lock (an OFD lock, owned by the description, not by a process) on
//     a byte of the description it sends, closes its own descriptor of it, and keeps another
//     description of the memfd (reopened through /proc) to look with (startProbe());
//  2. at each housekeeping tick it asks that lock (F_OFD_GETLK): held means a descriptor of
//     the sent description is still open somewhere: a message in a socket, a receiver between
//     its receive and its record, or one keeping it while it holds the segment; nothing is
//     done (a receiver's parked mapping of the segment counts too, until it decays: NOTE
//     [Cache decay]);
//  3. released means none is left anywhere: every reference the slots do not account for was
//     carried by a message that is gone without being recorded, so the total is set back to
//     what the live slots hold (a compare-and-swap), once the same (total, slots) pair has been
//     seen at two ticks in a row: a live holder's release lowers its slot and then the total,
//     and a read between the two would count its reference as lost.
// When the segment comes back, the probe's description becomes the one sent (no lock on it);
// the next probe locks another byte, so a descriptor of the old description still open (a
// receiver's reserve: NOTE [Receive reserve]) does not hide the new one's end. A receiver
// drops its reference before it closes a descriptor it does not keep (handle.ts), never the
// other way. No cost per message: a probe costs three system calls once per segment that
// stays busy over a tick with references unaccounted, and one per tick while it stays so.
// Named segments (file_system) are sent by name, without a descriptor of their own: their
// messages carry a witness instead (NOTE [Witnesses of named segments], witness.ts), which
// stands in for steps 1-2; step 3 is the same. Known gap: a holder
// stopped (SIGSTOP) for two ticks between the two steps of a release makes step 3 take one
// reference too many.
import { addon } from '../native/index.js';
import type { CacheEntry } from './cache-entry.js';
import type { Segment, SpareLike } from './segment.js';
import { W_REFS, wakeCreator } from './segment-header.js';
import { namedInFlightGone, witnessFree } from './witness.js';

/** Where the probe locks lie: past any data, one byte per probe (Segment.probeCount). */
const PROBE_BASE = 2 ** 40;

/** What step 3 saw at the last tick, per busy entry: `total * 2^21 + slots` (both under 2^21 in practice). */
const seen = new WeakMap<object, number>();

/**
 * NOTE [Orphans in flight] for one busy entry whose total `refs` exceeds `inSlots`, what the
 * live holders' slots hold (this process's included). Returns the references taken back.
 */
export function settleInFlight(entry: CacheEntry<SpareLike>, refs: number, inSlots: number): number {
  const seg = entry.segment;
  const named = seg.name !== null;
  if (!named && seg.probeFd === null && !startProbe(seg)) return 0;
  if (named ? !namedInFlightGone(seg) : sentDescriptorOpen(seg)) {
    seen.delete(entry);
    return 0;
  }
  const now = refs * 2 ** 21 + inSlots;
  if (seen.get(entry) !== now) {
    seen.set(entry, now);
    return 0;
  }
  seen.delete(entry);
  return settleTotal(seg, refs, inSlots) ? refs - inSlots : 0;
}

/**
 * Step 1: locks the descriptor this owned memfd sends (its open file description, which every
 * copy sent shares), closes this process's copy, and keeps a descriptor of its own to look at
 * that lock with. False if it cannot (not an owned memfd, or no descriptor to be had): the
 * segment is then left as it was.
 */
function startProbe(seg: Segment): boolean {
  const sent = seg.fd;
  if (!seg.probeable || sent === null || seg.unmapped) return false;
  let probe: number;
  try {
    probe = addon.reopen(sent);
  } catch {
    return false;
  }
  try {
    addon.ofdLock(sent, PROBE_BASE + seg.probeCount);
  } catch {
    addon.close(probe);
    return false;
  }
  seg.closeFd();
  seg.probeFd = probe;
  return true;
}

/** Step 2, while probing: whether any descriptor this segment sent is still open, anywhere (a message, a process). */
function sentDescriptorOpen(seg: Segment): boolean {
  try {
    return addon.ofdLocked(seg.probeFd!, PROBE_BASE + seg.probeCount);
  } catch {
    return true; // cannot tell: as if it were
  }
}

/** Step 3: sets the total from `from` to `to` if it is still `from`; true if it was. */
function settleTotal(seg: Segment, from: number, to: number): boolean {
  if (Atomics.compareExchange(seg.header, W_REFS, from, to) !== from) return false;
  wakeCreator(seg.header, seg.mapping, to);
  return true;
}

/**
 * An owned segment came back free (segment-cache.ts): nothing of it is in flight. Ends probing:
 * the probe's descriptor, which holds no lock, is the one sent from now on; the next probe
 * locks another byte, so that a descriptor of the old one still open somewhere (a receiver's
 * reserve) does not hide the new one's end. A named segment's witness epochs are forgotten.
 */
export function segmentFree(seg: Segment): void {
  witnessFree(seg);
  const probe = seg.probeFd;
  if (probe === null) return;
  seg.probeFd = null;
  seg.keepFd(probe);
  seg.probeCount++;
}
