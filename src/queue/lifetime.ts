// Lifetimes of queues, pipe ends and events in one process (or thread).
//
// NOTE [Queue objects and descriptors]
// Each Queue, SimpleQueue, Connection or Event object owns its descriptors (two socket ends
// and a state memfd for a Queue). Objects received in a message or in spawn arguments come
// with descriptors of their own (SCM_RIGHTS or stdio slots make new ones; a thread child
// duplicates its parent's). So that a process that receives the same queue again and again
// (a reply queue in every request, say) does not pile up descriptors, a received object is
// recognised by the identity of its socket (device and inode) and the object this process
// already has is returned, its new descriptors closed; as with storages, a process that gets
// back its own queue gets the same object.
// close() releases the descriptors at once. An object dropped without close() is closed when
// garbage-collected (nothing can use it any more), and a worker thread closes what it still
// holds when it exits: threads share the descriptor table of their process, so what a thread
// leaves open would stay open.
import { onExit } from '../exit-hooks.js';
import { isMainThread } from 'node:worker_threads';
import { addon, systemError } from '../native/index.js';
import { FrameDecodeError } from '../errors.js';

export interface Closable {
  close(): void;
  /** close() for a worker thread that exits now (its event loop will not run again). */
  closeAtExit?(): void;
}

const open = new Set<Closable>();
const finalizer = new FinalizationRegistry<Closable>((core) => {
  open.delete(core);
  core.close();
});
const byIdentity = new Map<string, WeakRef<object>>();

/** Tracks `core` (whose close() frees the descriptors) for as long as `owner` lives. */
export function track(owner: object, core: Closable): void {
  open.add(core);
  finalizer.register(owner, core, core);
}

/** Stops tracking after an explicit close(). */
export function untrack(core: Closable): void {
  open.delete(core);
  finalizer.unregister(core);
}

/** The identity of what a descriptor refers to (a socket, a memfd): device and inode. */
export function identityKey(fd: number): string {
  let st: readonly number[];
  try {
    st = addon.fstat(fd);
  } catch (e) {
    throw systemError(e, 'reading the identity of a queue, pipe end or event');
  }
  return `${st[1]}:${st[2]}`;
}

/** identityKey() of a new endpoint's socket; the endpoint is closed if it cannot be read. */
export function keyOrClose(endpoint: Closable & { readonly recvFd: number }): string {
  try {
    return identityKey(endpoint.recvFd);
  } catch (e) {
    endpoint.close();
    throw e;
  }
}

export function remember(key: string, obj: object): void {
  byIdentity.set(key, new WeakRef(obj));
  if (byIdentity.size % 256 === 0) {
    for (const [k, ref] of byIdentity) if (ref.deref() === undefined) byIdentity.delete(k);
  }
}

/** The live object this process has for `key`, if `usable` says it is still open. */
function known<T extends object>(key: string, usable: (obj: T) => boolean): T | undefined {
  const obj = byIdentity.get(key)?.deref() as T | undefined;
  if (obj === undefined) return undefined;
  if (!usable(obj)) {
    byIdentity.delete(key);
    return undefined;
  }
  return obj;
}

/**
 * rebuild() of a queue-like object (NOTE [Queue objects and descriptors]): the object this
 * process already has for the identity of `fds[keyIndex]`, its new descriptors closed, or
 * else `adopt(key)`, which takes them all. One fstat; descriptors are closed whatever fails.
 */
export function reuseOrAdopt<T extends object>(fds: number[], keyIndex: number, usable: (obj: T) => boolean, adopt: (key: string) => T): T {
  let key: string;
  try {
    key = identityKey(fds[keyIndex]!);
  } catch (e) {
    closeAll(fds);
    throw e;
  }
  const existing = known<T>(key, usable);
  if (existing !== undefined) {
    closeAll(fds);
    return existing;
  }
  return adopt(key);
}

/** Closes descriptors that came with a message but are not needed (a known object). */
export function closeAll(fds: number[]): void {
  for (const fd of fds) {
    try {
      addon.close(fd);
    } catch {
      // already closed
    }
  }
}

if (!isMainThread) {
  onExit(() => {
    for (const core of open) (core.closeAtExit ?? core.close).call(core);
    open.clear();
  });
}

/** A received state array of `n` integers (a malformed one is a FrameDecodeError). */
export function checkState(state: unknown, n: number, what: string): number[] {
  if (!Array.isArray(state) || state.length !== n || !state.every((x) => Number.isSafeInteger(x))) {
    throw new FrameDecodeError(`A received ${what} entry is malformed.`);
  }
  return state as number[];
}
