// Who holds a lock: a 31-bit token naming one thread of one process, and whether that thread
// still lives. See NOTE [Robust holders].
//
// NOTE [Robust holders]
// Python's and torch's locks are POSIX semaphores: a process killed inside one leaves it held
// for ever. Ours record their holder in the lock word itself, so that a waiter can tell when
// the holder has died and take the lock over (and say so). The choices, measured on the
// 2-core machines this project runs on (Node 20):
//  - Kernel-backed primitives that die with their holder: a robust futex must be on the
//    thread's robust list, which glibc owns (set_robust_list takes one head per thread, and
//    glibc's robust mutexes already use it); pthread robust mutexes are owned by the thread
//    that locked them, where an async acquire waits on a helper thread; fcntl/OFD locks cost
//    a system call on every acquire and every release (Python's uncontended acquire+release
//    takes none: 91 ns here), and are owned per open file description, not per thread.
//  - A holder token in the word plus a liveness check by the waiter: the uncontended path is
//    one compare-and-swap to acquire and one exchange to release (each a V8 builtin call,
//    11 ns here; nothing else on that path), and only a waiter that has waited a whole slice
//    (WAIT_SLICE_MS in wait.ts) with the same holder in the word looks at the holder in
//    /proc. That is the design taken.
// The token is the holder thread's kernel id (below 2^22: PID_MAX_LIMIT on 64-bit Linux) and
// 9 bits of its start time (/proc/<tid>/stat field 22), so that a thread id reused by a new
// thread after the holder died does not pass for the holder (one chance in 512 that it does;
// then the lock waits for that thread instead, and is taken over once it is gone). Bit 31 of a
// lock word is left for its waiters flag. Thread ids are those of the pid namespace of /proc:
// processes in different pid namespaces cannot share our locks (documented in the README).
// A thread is dead when /proc/<tid> is gone, is a zombie (a killed process before its parent
// reaps it), or started at another time. Threads are the holders (as in Python, where an RLock
// belongs to a thread): the async tasks of one thread are one holder.
import { readFileSync } from 'node:fs';

/** The bits of a lock word that hold the token; bit 31 is the waiters flag. */
export const TOKEN_MASK = 0x7fffffff;
export const WAITERS = 1 << 31;
const TID_BITS = 22;
const TID_MASK = (1 << TID_BITS) - 1;

interface Stat {
  readonly state: string;
  readonly start: number;
}

/** /proc/<tid>/stat's state letter and start time, or null when the thread is gone. */
function stat(path: string): Stat | null {
  let text: string;
  try {
    text = readFileSync(path, 'latin1');
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ENOENT' || code === 'ESRCH') return null;
    throw e;
  }
  return parseStat(text);
}

function parseStat(text: string): Stat {
  // The command name (field 2) may hold spaces and parentheses: fields are counted after
  // its last ')'. Field 3 is the state, field 22 the start time (clock ticks since boot).
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: rest[0]!, start: Number(rest[19]) };
}

function startBits(start: number): number {
  return (start ^ (start >>> 9) ^ (start >>> 18)) & 0x1ff;
}

function tokenOf(tid: number, start: number): number {
  return (tid | (startBits(start) << TID_BITS)) & TOKEN_MASK;
}

let me = 0;

/** This thread's token (module state is per thread: each worker thread has its own). */
export function myToken(): number {
  if (me === 0) {
    const text = readFileSync('/proc/thread-self/stat', 'latin1');
    const tid = Number(text.slice(0, text.indexOf(' ')));
    if (!(tid > 0 && tid <= TID_MASK)) throw new Error(`tensorproc: thread id ${tid} does not fit a lock word.`);
    me = tokenOf(tid, parseStat(text).start);
  }
  return me;
}

/**
 * Whether the thread a token names still runs. When /proc cannot be read for another reason
 * (no descriptor left, say) the holder is taken to live: a lock is never taken from a live
 * holder, at worst a dead one is noticed at a later look.
 */
export function holderAlive(token: number): boolean {
  const t = token & TOKEN_MASK;
  if (t === myToken()) return true;
  let s: Stat | null;
  try {
    s = stat(`/proc/${t & TID_MASK}/stat`);
  } catch {
    return true;
  }
  if (s === null || s.state === 'Z' || s.state === 'X' || s.state === 'x') return false;
  return tokenOf(t & TID_MASK, s.start) === t;
}

/** The thread id in a token (for messages). */
export function tokenTid(token: number): number {
  return token & TID_MASK;
}
