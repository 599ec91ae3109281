// The witness that named segments' messages carry (NOTE [Witnesses of named segments]): one
// per thread, sent with every message that carries a named segment of this thread's own, so
// that the owner can tell, as it can for memfds, when no such message is left anywhere.
//
// NOTE [Witnesses of named segments]
// NOTE [Orphans in flight] needs the kernel to say when no message carrying a segment is left
// anywhere. A memfd's messages carry its descriptor, which says it; a named segment's carry
// its name only. So a message that carries a named segment of the sender's own also carries
// one descriptor: a witness, an open file description of a small memfd of the sender's
// thread (never mapped by anyone), the same description for every message of an epoch. A
// receiver takes it off the socket with the datagram (the kernel installs it in the same
// call), holds it while it decodes, and closes it only once every storage of the message has
// been adopted (recorded in its slot) or released (handle.ts, and the frame decoders, which
// close descriptors they do not take after the whole message). A receiver killed anywhere in
// between closes it by dying; a socket closed everywhere drops it with its messages.
// The owner numbers epochs and notes, per segment, the first and last epoch it sent the
// segment in since the segment was last free. When the housekeeping finds a busy named
// segment whose total exceeds what live slots hold (NOTE [Dead holders]):
//  1. if the segment was sent in the current epoch, the epoch ends (rotate()): a read lock
//     (an OFD lock, owned by the description) goes on the epoch's byte of its description,
//     this thread closes its own descriptor of it, and the next message starts a new
//     description (reopened from the memfd's first one, which is kept to look with);
//  2. an ended epoch whose lock is gone (F_OFD_GETLK from the kept description) has no
//     descriptor left anywhere: every message it carried was received, and its storages
//     adopted or released, or lost with its receiver;
//  3. once every epoch the segment was sent in has ended so, no message of the owner carrying
//     it is anywhere, and what the live slots do not account for is taken back as for a memfd
//     (the same (total, slots) pair at two ticks, then a compare-and-swap).
// Messages of other processes that pass a named segment on carry no witness of the owner's:
// such a sender sets header word 8 (NOTE [Reference slots]) before it adds the message's
// reference, and the owner takes nothing back from a segment with it set; the word is cleared
// when the segment comes back free (total 1: nothing in flight, nobody else holding it, so
// nobody left to pass it on). Such segments keep the one-minute rule (NOTE [Dead holders]).
// Cost: one descriptor per message that carries a segment of the sender's (passed with the
// datagram, closed by the receiver; no more held for good than before: file_system receivers
// keep none), and three system calls per epoch ended, at most one per housekeeping tick and
// only while an owned named segment has references unaccounted for. A receiver closes
// witnesses in batches (NOTE [Witness bin]): a steady stream costs no close() per message.
// While a receiver still reserves a slot per receive, a lone tensor's witness becomes its
// receive reserve (NOTE [Receive reserve]), closed by its next receive. Known gap: a receiver
// that stops receiving without closing keeps its last witnesses until its next housekeeping
// tick (the reserve one until it receives again or empties its cache), and orphans of that
// epoch wait for it.
import { isMainThread } from 'node:worker_threads';
import { addon } from '../native/index.js';
import { onExit } from '../exit-hooks.js';
import { W_UNWITNESSED } from './segment-header.js';
import type { Segment } from './segment.js';

/** Where the epochs' locks lie: byte BASE + epoch of the witness memfd. */
const BASE = 2 ** 40;

/** The memfd's first description: never sent; the one the locks are looked at from. */
let probe: number | null = null;
/** The current epoch's description, sent with this epoch's messages; null until the first. */
let current: number | null = null;
let epoch = 0;
/** Epochs ended whose end was not seen yet: true while their lock can be looked at. */
const ended = new Map<number, boolean>();
/** Epochs before this one belong to a witness closed since (emptyCache()): never seen to end. */
let firstKnown = 0;

/**
 * The descriptor to send with a message that carries `segment` (a named segment): the
 * witness for one of this thread's own, null for one of another process's (which marks it
 * passed on, header word 8) or when none can be had. Call before the message's reference is
 * added (retain()).
 */
export function witnessFor(segment: Segment): number | null {
  const fd = segment.owned ? currentWitness() : null;
  if (fd === null) {
    if (Atomics.load(segment.header, W_UNWITNESSED) === 0) Atomics.store(segment.header, W_UNWITNESSED, 1);
    return null;
  }
  if (segment.sentFirst < 0) segment.sentFirst = epoch;
  segment.sentLast = epoch;
  return fd;
}

function currentWitness(): number | null {
  if (current !== null) return current;
  try {
    if (probe === null) probe = addon.memfdCreate('tensorproc-witness', 1);
    current = addon.reopen(probe);
  } catch {
    return null; // out of descriptors: the message goes unwitnessed
  }
  return current;
}

/** Ends the current epoch (step 1): its description locked, and this thread's copy closed. */
function rotate(): void {
  if (current === null) return;
  let locked = true;
  try {
    addon.ofdLock(current, BASE + epoch);
  } catch {
    locked = false; // cannot be looked at: this epoch is never seen to end
  }
  addon.close(current);
  current = null;
  ended.set(epoch, locked);
  epoch++;
}

/**
 * Whether no message this thread sent `segment` with since it was last free is left
 * anywhere (steps 1-3); false when it cannot be told. Ends the current epoch if needed.
 */
export function namedInFlightGone(segment: Segment): boolean {
  const first = segment.sentFirst;
  const last = segment.sentLast;
  if (Atomics.load(segment.header, W_UNWITNESSED) !== 0 || first < firstKnown) return false;
  if (last >= epoch) {
    rotate();
    return false;
  }
  for (const [e, lookable] of ended) {
    if (e < first || e > last) continue;
    if (!lookable) return false;
    try {
      if (addon.ofdLocked(probe!, BASE + e)) return false;
    } catch {
      return false;
    }
    ended.delete(e);
  }
  return true;
}

/** An owned segment came back free (in-flight.ts's segmentFree()): nothing of it is in flight. */
export function witnessFree(segment: Segment): void {
  if (segment.sentFirst >= 0) segment.sentFirst = segment.sentLast = -1;
  if (segment.name !== null && Atomics.load(segment.header, W_UNWITNESSED) !== 0) Atomics.store(segment.header, W_UNWITNESSED, 0);
}

/**
 * The owner's cache holds no busy named segment (the end of a housekeeping pass): the witness
 * holds no descriptor of this process's while nothing needs it. The current epoch ends; once
 * every ended epoch is seen over, the memfd goes too (a later message makes a new one).
 */
export function witnessIdle(): void {
  if (probe === null) return;
  rotate();
  for (const [e, lookable] of ended) {
    if (!lookable) return;
    try {
      if (addon.ofdLocked(probe, BASE + e)) return;
    } catch {
      return;
    }
    ended.delete(e);
  }
  addon.close(probe);
  probe = null;
}

/** emptyCache(), a thread's exit: the witness's descriptors go (epochs so far are never seen to end). */
export function closeWitness(): void {
  if (current !== null) {
    addon.close(current);
    current = null;
    epoch++;
  }
  if (probe !== null) {
    addon.close(probe);
    probe = null;
  }
  ended.clear();
  firstKnown = epoch;
}

// Threads share the process's descriptor table: a worker thread's witness would outlive it.
if (!isMainThread) onExit(closeWitness);
