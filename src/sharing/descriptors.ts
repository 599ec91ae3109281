// The descriptors this process keeps for received memfds, its receive reserve, and what is
// done when descriptors run short.
//
// NOTE [Kept descriptors]
// A memfd can only be passed on, or sent back to its owner as the same memory, with a
// descriptor, so a receiver keeps the descriptor of every received memfd segment it still
// holds (a live storage over it), and closes it when it lets go (the segment is parked: a
// segment that arrives again brings a new one). Holding many tensors must not run the
// process out of descriptors (PyTorch's "Too many open files"), so:
//  - tensorproc raises the open-file soft limit to the hard one when it loads (src/native,
//    as Go's runtime does): typical hard limits (524,288 under systemd, 1,048,576 in Docker)
//    cover what memory can hold;
//  - at most KEEP_FDS received descriptors are kept (TENSORPROC_KEEP_FDS, default half the
//    limit); past that the least recently used one is closed, and forwarding that tensor
//    copies it once into a segment of this process (exportStorage), announced by one
//    ForwardCopyWarning (ERR_TP_FORWARD_COPY) saying what to change;
//  - when a descriptor cannot be had (EMFILE), what is kept for reuse only goes first
//    (shedDescriptors(): the segment cache's free and busy segments, then kept descriptors),
//    and the call is made again.
// Owners keep their own segments' descriptors in their cache (NOTE [Segment recycling]).
//
// NOTE [Receive reserve]
// recv makes sure a descriptor slot is free before it takes a datagram (NOTE [Receiving
// descriptors], native/channel.cc): by closing a reserve descriptor if it is given one, or
// else by a probe (two system calls). The descriptor a receiver closes when it parks a
// segment serves as that reserve: kept open until the next receive closes it, it costs
// nothing more, and it pins no memory the parked mapping does not pin already (it is closed
// with that mapping). A receive that closed the reserve and found nothing leaves an eventfd
// in its place (while it has nothing else to do). A steady consumer of memfd tensors (get,
// use, release) then receives with no probe: its system calls per message are those it made
// before the probe.
// A stream whose datagrams carry no descriptors (plain data: a pool's tasks) gives nothing to
// stash, and would pay the probe on every message; one whose datagrams carry only witnesses
// (file_system tensors: NOTE [Witness bin]) would pay a close per message. So an endpoint
// that has received PROBE_AFTER datagrams in a row that needed no slot stops making sure of
// one (datagram-reader.ts), and the reserve, kept then as an eventfd, covers the one
// descriptor such a message may need afterwards (opening a file_system segment's name:
// withReserve()). A datagram met by such a receive in a process out of descriptors has its
// descriptors dropped by the kernel: delivered if they were witnesses only, else lost and
// reported as such (known gap); the endpoint makes sure of a slot again from then on.
import { onExit } from '../exit-hooks.js';
import { isMainThread } from 'node:worker_threads';
import { addon, fileLimit, RECV_PROBE } from '../native/index.js';
import { ForwardCopyWarning } from '../errors.js';
import { onSegmentUnmapped, type Segment } from './segment.js';
import { envNumber } from '../env.js';
import { binWitness, binnedCount, closeBinned } from './witness-bin.js';

const KEEP_ENV = envNumber('TENSORPROC_KEEP_FDS');
const KEEP_FIXED = KEEP_ENV !== undefined ? Math.floor(KEEP_ENV) : null;
const budgetOf = (limit: number): number => KEEP_FIXED ?? Math.max(16, Math.floor(limit / 2));
/** The open-file limit as last read: another process may lower it (prlimit --pid), so it is read again now and then. */
let limit = fileLimit;
let budget = budgetOf(limit);
let keeps = 0;
const kept = new Map<Segment, true>(); // insertion order: least recently used first
let warned = false;

/** Keeps `fd` for a received `segment` it holds (null: it holds its descriptor already). */
export function keepReceived(segment: Segment, fd: number | null): void {
  if (fd !== null) segment.keepFd(fd);
  if (segment.fd === null) return;
  kept.delete(segment);
  kept.set(segment, true);
  // One getrlimit per 64 descriptors kept: the bound follows a limit changed from outside.
  if (KEEP_FIXED === null && (++keeps & 63) === 0) budget = budgetOf((limit = addon.fileLimit()));
  if (kept.size > budget) {
    const [oldest] = kept.keys();
    kept.delete(oldest!);
    oldest!.closeFd();
  }
}

/** Marks a kept segment most recently used (it is being sent); one that is not kept stays out. */
export function touchKept(segment: Segment): void {
  if (kept.delete(segment)) kept.set(segment, true);
}

/** This process let go of a received segment: its descriptor becomes the receive reserve, or is closed. */
export function releaseReceived(segment: Segment): void {
  if (!kept.delete(segment)) return;
  const fd = segment.takeFd();
  if (fd === null) return;
  if (reserve === null) reserve = { fd, segment };
  else addon.close(fd);
}

let reserve: { fd: number; segment: Segment | null } | null = null;

/** The reserve for the next recv, which closes it (NOTE [Receive reserve]), or RECV_PROBE. */
export function takeReserve(): number {
  if (reserve === null) return RECV_PROBE;
  const { fd } = reserve;
  reserve = null;
  return fd;
}

/** An endpoint stops probing (NOTE [Receive reserve]): a reserve must be there for what its messages need later. */
export function ensureReserve(): void {
  if (reserve !== null) return;
  try {
    reserve = { fd: addon.reserveFd(), segment: null };
  } catch {
    // none to be had now: a later receive, or the next segment parked, makes one
  }
}

/**
 * An endpoint stops reserving because its datagrams carry witnesses at most (NOTE [Witness
 * bin]): the reserve may be the last of those witnesses, which no receive would close now,
 * and which would keep its owner's epoch from ending. It goes to the bin; an eventfd takes
 * its place.
 */
export function renewReserve(): void {
  if (reserve !== null && reserve.segment === null) {
    binWitness(reserve.fd);
    reserve = null;
  }
  ensureReserve();
}

/**
 * `open()` a descriptor for a received message (a file_system segment's name); out of
 * descriptors, the reserve's slot is given to it, then refilled (NOTE [Receive reserve]).
 */
export function withReserve<T>(open: () => T, isFull: (e: unknown) => boolean): T {
  try {
    return open();
  } catch (e) {
    if (!isFull(e) || (reserve === null && shedDescriptors() === 0)) throw e;
    if (reserve !== null) {
      addon.close(reserve.fd);
      reserve = null;
    }
    try {
      return open();
    } finally {
      ensureReserve();
    }
  }
}

/**
 * A received witness whose message is decoded (NOTE [Witness bin]): the receive reserve if
 * the endpoint took the last one (it is reserving), else into the bin.
 */
export function retireWitness(fd: number): void {
  retired++;
  if (reserve === null) reserve = { fd, segment: null };
  else binWitness(fd);
}
let retired = 0;

/** Witnesses retired so far: a reader compares it around a decode (NOTE [Witness bin]). */
export function witnessesRetired(): number {
  return retired;
}

/** The replacement a receive that found nothing made for the reserve it closed (-1: none). */
export function giveReserve(fd: number): void {
  if (fd < 0) return;
  if (reserve === null) reserve = { fd, segment: null };
  else addon.close(fd);
}

/** `segment` is being unmapped: a reserve that is its descriptor would pin its memory. */
onSegmentUnmapped((segment) => {
  if (reserve === null || reserve.segment !== segment) return;
  addon.close(reserve.fd);
  reserve = null;
});

/** The received segment's storage is about to be copied to travel on (NOTE [Kept descriptors]). */
export function warnForwardCopy(): void {
  if (warned) return;
  warned = true;
  process.emitWarning(
    new ForwardCopyWarning(
      `A received tensor was sent on as a copy, not as the memory it arrived in: this process keeps descriptors for at most ${budget} received ` +
        `file_descriptor segments (open-file limit ${limit}) and holds more, or ran out of descriptors. Raise the open-file limit (ulimit -n; ` +
        `TENSORPROC_KEEP_FDS), hold fewer received tensors at once, or use setSharingStrategy('file_system'), whose segments travel by name.`,
    ),
  );
}

const shedders: (() => number)[] = [];

/** Registers what can be given up for descriptors, cheapest first (the segment cache). */
export function onShed(shed: () => number): void {
  shedders.push(shed);
}

/**
 * Out of descriptors: closes those kept for reuse only (the segment cache's), and if that
 * frees none, the kept descriptors of received segments (their tensors will be copied if
 * sent on). Returns how many were closed; the caller tries again when any were.
 */
export function shedDescriptors(): number {
  let n = binnedCount();
  closeBinned();
  if (reserve !== null) {
    addon.close(reserve.fd);
    reserve = null;
    n++;
  }
  for (const shed of shedders) n += shed();
  if (n > 0) return n;
  n = kept.size;
  closeKept();
  return n;
}

/** emptyCache(): the descriptors kept for received tensors go (their mappings stay). */
export function closeKept(): void {
  for (const segment of kept.keys()) segment.closeFd();
  kept.clear();
}

/** emptyCache(), a thread's exit: the reserve goes. */
export function closeReserve(): void {
  if (reserve === null) return;
  addon.close(reserve.fd);
  reserve = null;
}

// Threads share the process's descriptor table: a worker thread's reserve would outlive it.
if (!isMainThread) onExit(closeReserve);

/** Received descriptors kept now (tests). */
export function keptCount(): number {
  return kept.size;
}
