// pool.stats(): what the pool has done and how long its tasks ran and waited, kept by the
// scheduler as results come back (NOTE [Stats rings] in workers/stats-ring.ts).
//
// NOTE [Pool stats]
// Counted in tasks (items: one call of the task function), as a user counts them; timed per
// chunk (chunksize items run as one unit: a task at chunksize 1), since that is what a
// worker runs and reports. A worker reports one elapsed time for the consecutive chunks of
// a DONE message (NOTE [Pool protocol]); each of them counts as their mean, and begins that
// mean after the one before, the first at the message's arrival less the elapsed time (the
// return trip, tens of µs, is not taken off). A chunk's wait is from when it was queued (a
// map's chunks: the call; an imap's: when the chunk was read from its input and given out)
// to that beginning. Busy share: the time a worker id spent running chunks over the time
// since the pool was made, its replacements included.
import { BusyClock, SampleRing, type Percentiles } from '../workers/stats-ring.js';

export interface PoolWorkerStats {
  /** The worker id (0 .. processes - 1); a replacement keeps its id. */
  id: number;
  /** Its current process's pid (threadId for threads); null between a death and its replacement. */
  pid: number | null;
  /** Tasks it has run, over its replacements. */
  done: number;
  /** Its share of the time since the pool was made spent running tasks, 0-1. */
  busy: number;
}

export interface PoolStats {
  /** Tasks that returned. */
  done: number;
  /** Tasks that threw, or were lost with a worker that died while running them. */
  failed: number;
  /** Tasks given to no worker yet (an imap's: read from its input and not given out). */
  queued: number;
  /** Tasks at a worker, begun or waiting there (NOTE [Pool windows]). */
  inFlight: number;
  /** Workers replaced: after a death, or after maxtasksperchild. */
  restarts: number;
  /** How long a chunk ran in its worker, over the last 1,000 chunks (ms). */
  runTime: Percentiles;
  /** How long a chunk waited from being queued to beginning (ms). */
  waitTime: Percentiles;
  workers: PoolWorkerStats[];
}

export class PoolMeter {
  done = 0;
  failed = 0;
  readonly run = new SampleRing();
  readonly wait = new SampleRing();
  readonly #busy: BusyClock;
  readonly #doneBy: Float64Array;

  constructor(size: number) {
    this.#busy = new BusyClock(size);
    this.#doneBy = new Float64Array(size);
  }

  /** Worker `id` spent `elapsedUs` running the chunks of one DONE message. */
  busy(id: number, elapsedUs: number): void {
    this.#busy.add(id, elapsedUs / 1000);
  }

  /** One chunk of `n` tasks of worker `id` done, `ok` or not, that ran `runMs` and waited `waitMs`. */
  chunk(id: number, n: number, ok: boolean, runMs: number, waitMs: number): void {
    if (ok) {
      this.done += n;
      this.#doneBy[id]! += n;
    } else this.failed += n;
    this.run.push(runMs);
    this.wait.push(Math.max(waitMs, 0));
  }

  workers(pids: readonly (number | null)[]): PoolWorkerStats[] {
    return pids.map((pid, id) => ({ id, pid, done: this.#doneBy[id]!, busy: this.#busy.share(id) }));
  }
}
