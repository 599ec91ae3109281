// The receiver's side of named segments' witnesses (NOTE [Witnesses of named segments],
// witness.ts): where a witness goes once its message's storages are adopted or released.
//
// NOTE [Witness bin]
// Closing each witness as its message is decoded cost a close() per file_system message, on
// top of the recvmsg that installed it: the largest part of what witnesses added to a 1 KiB
// stream (W1, issue 25). A witness closed later is no less correct: it tells its owner that
// a message *may* still hold a reference, so keeping it open longer only delays the owner's
// taking back of orphans, never frees anything early. So:
//  - while the endpoint still makes sure of a free slot before each receive (NOTE [Receive
//    reserve]), a witness becomes the reserve, as before, which the next receive closes;
//  - otherwise it goes into this thread's bin, and the bin is closed as a whole
//    (addon.closeFds: the kernel numbered them from the lowest free slot up, so mostly one
//    close_range) when it holds BIN_SIZE, at every housekeeping tick (so an owner waits at
//    most one tick more than before), by emptyCache() (the tests' leak checks) and when the
//    thread exits (threads share the process's descriptor table).
// An endpoint stops reserving once its datagrams carry nothing but witnesses (datagram-
// reader.ts): it then receives with RECV_DROPS_SEEN, and a lone file_system tensor whose
// witness the kernel had to drop (a full table) is still delivered; the owner's two-tick rule
// (NOTE [Dead holders]) covers the reference that no witness vouches for while it is adopted,
// as it covers any receiver mid-decode. What still needs descriptors is lost then, as before
// (NOTE [Receive reserve]'s known gap).
import { isMainThread } from 'node:worker_threads';
import { addon } from '../native/index.js';
import { onExit } from '../exit-hooks.js';

/** Witnesses gathered before they are closed together. */
const BIN_SIZE = 64;

const bin = new Int32Array(BIN_SIZE);
let held = 0;
let onFirst: () => void = () => {};

/** `fn` is called when the bin stops being empty: the allocator starts its housekeeping timer. */
export function onBinned(fn: () => void): void {
  onFirst = fn;
}

/** Keeps a received witness `fd` to close with the others (NOTE [Witness bin]). */
export function binWitness(fd: number): void {
  if (held === 0) onFirst();
  bin[held++] = fd;
  if (held === BIN_SIZE) closeBinned();
}

/** Closes the witnesses in the bin: the housekeeping tick, emptyCache(), a thread's exit. */
export function closeBinned(): void {
  if (held === 0) return;
  const n = held;
  held = 0;
  addon.closeFds(bin, n);
}

/** Witnesses waiting in the bin (tests). */
export function binnedCount(): number {
  return held;
}

if (!isMainThread) onExit(closeBinned);
