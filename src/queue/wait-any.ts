// mp.wait(): Python's multiprocessing.connection.wait, over pipe ends, queues and events.
//
// Nothing is polled in a loop: each queue or pipe end is watched by the event loop (its
// endpoint's readable interest, epoll underneath, taking nothing off the socket), each event
// by the futex wait its own wait() uses. The first that reports stops every watch (the
// events' futex threads are woken then, so nothing is left waiting), and the answer is read
// then from all of them at once: every object with a message waiting, every event set (or
// set and cleared again while the wait lasted, as Event.wait() counts it).
import { InvalidArgumentError, QueueClosedError } from '../errors.js';
import { describeValue } from '../describe-value.js';
import { timeoutOption } from '../transport/index.js';
import { Connection } from './connection.js';
import { Event } from './event.js';
import type { Queue } from './queue.js';
import type { SimpleQueue } from './simple-queue.js';
import { endpointOf } from './waitable.js';

/** What mp.wait() watches. */
export type Waitable = Connection<unknown> | Queue<unknown> | SimpleQueue<unknown> | Event;

export interface WaitOptions {
  /** Milliseconds; absent: wait as long as it takes. 0: look once, do not wait. */
  timeout?: number;
}

interface Watched<T> {
  readonly obj: T;
  /** Whether it is ready now (a message waits, the event is set); throws if closed here. */
  ready(): boolean;
  /**
   * Starts watching; `onReady` is called once it may be ready (`fired`: an event was set
   * meanwhile, even if cleared since), or was closed. Returns what stops it.
   */
  watch(onReady: (fired: boolean) => void, stop: Promise<void>): () => void;
}

/**
 * Resolves with those of `objects` that are ready: a Connection, Queue or SimpleQueue with a
 * message to receive (or whose sending ends are all closed: the receive then says so), an
 * Event that is set. Waits until at least one is, or `timeout` ms (then `[]`); takes nothing.
 * Rejects with QueueClosedError when one of them is closed in this process.
 */
export async function wait<T extends Waitable>(objects: Iterable<T>, options?: WaitOptions): Promise<T[]> {
  const limit = timeoutOption(options);
  const watched = checkObjects(objects);
  if (watched.length === 0 && limit === null) {
    throw new InvalidArgumentError('mp.wait([]) with no timeout would wait for ever: give it objects to watch, or a timeout.');
  }
  const fired = new Set<T>();
  const readyNow = (): T[] => watched.filter((w) => fired.has(w.obj) || w.ready()).map((w) => w.obj);
  const deadline = limit === null ? Infinity : performance.now() + limit;
  for (;;) {
    const ready = readyNow();
    if (ready.length > 0 || limit === 0) return ready;
    const left = deadline - performance.now();
    if (left <= 0) return [];
    let stopAll!: () => void;
    const stop = new Promise<void>((resolve) => (stopAll = resolve));
    let timer: NodeJS.Timeout | null = null;
    const stops: (() => void)[] = [];
    await new Promise<void>((resolve) => {
      if (left !== Infinity) timer = setTimeout(resolve, left);
      for (const w of watched) {
        stops.push(
          w.watch((set) => {
            if (set) fired.add(w.obj);
            resolve();
          }, stop),
        );
      }
    });
    if (timer !== null) clearTimeout(timer);
    for (const s of stops) s();
    stopAll();
    // Ready or not (another consumer may have taken the message meanwhile): look again.
  }
}

function checkObjects<T extends Waitable>(objects: Iterable<T>): Watched<T>[] {
  if (objects === null || typeof objects !== 'object' || typeof (objects as Iterable<T>)[Symbol.iterator] !== 'function') {
    throw new InvalidArgumentError(
      `mp.wait() takes a list of Connections, Queues, SimpleQueues and Events (got ${describeValue(objects)}).`,
    );
  }
  const out: Watched<T>[] = [];
  const seen = new Set<unknown>();
  let i = 0;
  for (const obj of objects) {
    const at = i++;
    if (seen.has(obj)) continue;
    seen.add(obj);
    out.push(watchedOf(obj, at));
  }
  return out;
}

function watchedOf<T extends Waitable>(obj: T, at: number): Watched<T> {
  if (obj instanceof Event) {
    if (!isOpenEvent(obj)) throw closedError('an event', at);
    return {
      obj,
      ready: () => obj.isSet(),
      watch: (onReady, stop) => {
        // A set during the wait, a close here (its rejection) or the stop: all end the watch.
        obj.waitUntil(null, stop).then(
          (set) => set && onReady(true),
          () => onReady(false),
        );
        return () => {};
      },
    };
  }
  const endpoint = typeof obj === 'object' && obj !== null ? endpointOf(obj) : undefined;
  if (endpoint === undefined) {
    throw new InvalidArgumentError(`mp.wait() watches Connections, Queues, SimpleQueues and Events; item ${at} is ${describeValue(obj)}.`);
  }
  if (obj instanceof Connection && !obj.readable) {
    throw new InvalidArgumentError(`Item ${at} of mp.wait() is the sending end of a one-way Pipe: wait on the other end.`);
  }
  if (endpoint.closed) throw closedError(obj instanceof Connection ? 'a pipe end' : 'a queue', at);
  return { obj, ready: () => endpoint.ready(), watch: (onReady) => endpoint.watchReady(() => onReady(false)) };
}

function isOpenEvent(e: Event): boolean {
  try {
    e.isSet();
    return true;
  } catch {
    return false;
  }
}

function closedError(what: string, at: number): QueueClosedError {
  return new QueueClosedError(`Item ${at} of mp.wait() is ${what} closed in this process; it cannot be waited on here any more.`);
}
