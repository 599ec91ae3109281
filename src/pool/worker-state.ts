// What the Pool's parent side (pool/scheduler.ts) knows of one worker id: the chunks it holds,
// in a ring by sequence number (NOTE [Pool protocol]), and its window.
//
// NOTE [Pool windows]
// Each worker is given at most `window` chunks at a time, in batches, and is topped up when
// half of them have come back (an idle worker at once), so a worker always has its next
// chunks waiting while it runs these. The window is sized so that the chunks waiting at a
// worker take about TARGET_US to run (from the time the worker reports): 2 for slow tasks
// (so that a slow task holds back little, and an abort or a death has little to sort out),
// up to MAX_WINDOW for tiny ones, where the round trips between batches are the cost.
import type { Call } from './calls.js';

export const START_WINDOW = 2;
const MAX_WINDOW = 512;
const RING = 1024; // > MAX_WINDOW, a power of two
export const MASK = RING - 1;
const TARGET_US = 2000;

export class WorkerState {
  /** Chunks [doneSeq, nextSeq) are at this worker. Sequence numbers go on across replacements. */
  nextSeq = 0;
  doneSeq = 0;
  readonly calls: (Call | null)[] = new Array<Call | null>(RING).fill(null);
  readonly index = new Int32Array(RING);
  readonly kept: unknown[] = new Array<unknown>(RING);
  /** When each chunk began waiting (performance.now(), NOTE [Pool stats]). */
  readonly queuedAt = new Float64Array(RING);
  window = START_WINDOW;
  /** Microseconds a chunk takes here, smoothed; 0 until known. */
  estimate = 0;
  /** Chunks given to this worker's current process (maxtasksperchild). */
  assigned = 0;
  ready = false;
  alive = true;
  /** Stopped to end an abort (NOTE [Pool aborts]). */
  stoppedForAbort = false;
  /** The call with a signal whose chunks it holds, and how many (NOTE [Pool aborts]). */
  exclusive: Call | null = null;
  exclusiveCount = 0;
  /** SIGKILL after an abort's SIGTERM, if it is still running then. */
  killTimer: NodeJS.Timeout | null = null;
  /** The chunks [stealFrom, stealTo) taken back from it (NOTE [Pool stealing]). */
  stealFrom = 0;
  stealTo = 0;
  /** Task functions this process has been told of (TARGET). */
  targets = new Set<number>();

  inFlight(): number {
    return (this.nextSeq - this.doneSeq) | 0;
  }

  /** How many tasks its chunks hold (pool.stats()). */
  tasksHeld(): number {
    let n = 0;
    for (let seq = this.doneSeq; seq !== this.nextSeq; seq = (seq + 1) | 0) {
      const call = this.calls[seq & MASK];
      if (call !== null && call !== undefined && !call.settled) n += call.lengthOf(this.index[seq & MASK]!, this.kept[seq & MASK]);
    }
    return n;
  }

  /** Whether chunk `seq` (the worker's progress word) is one it holds, of `call`. */
  holds(seq: number, call: Call): boolean {
    const since = (seq - this.doneSeq) | 0;
    return since >= 0 && since < this.inFlight() && this.calls[seq & MASK] === call;
  }

  /** A DONE of `count` chunks that took `elapsedUs` here: the window follows (NOTE [Pool windows]). */
  observe(elapsedUs: number, count: number): void {
    const perChunk = elapsedUs / count;
    this.estimate = this.estimate === 0 ? perChunk : 0.7 * this.estimate + 0.3 * perChunk;
    this.window = Math.max(START_WINDOW, Math.min(MAX_WINDOW, Math.floor(TARGET_US / Math.max(this.estimate, 0.01))));
  }

  /** A new process in this id's place. */
  reset(): void {
    this.window = START_WINDOW;
    this.assigned = 0;
    this.ready = false;
    this.alive = true;
    this.stoppedForAbort = false;
    this.exclusive = null;
    this.exclusiveCount = 0;
    this.targets = new Set();
  }

  /** Forgets every chunk it held (the pool is done with them). */
  clear(): void {
    this.calls.fill(null);
    this.kept.fill(undefined);
    this.doneSeq = this.nextSeq;
  }
}
