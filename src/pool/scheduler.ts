// The Pool's parent side: which worker holds which chunks, batches to and from them, and
// what the chunks of a worker that died become (NOTE [Pool protocol], NOTE [Pool control
// block]) (NOTE [Pool windows] in pool/worker-state.ts, NOTE [Pool aborts] in pool/aborts.ts,
// NOTE [Pool redispatch] in pool/redispatch.ts). Starting, replacing and stopping the workers
// is pool/worker-lives.ts's.
import { encodeMessage, type Frame } from '../transport/index.js';
import type { TargetSpec } from '../process/target.js';
import type { StartMethod } from '../process/index.js';
import type { PoolBrokenError } from '../errors.js';
import type { SerializedError } from '../process/messages.js';
import { rebuildTaskError } from './task-error.js';
import type { Call, CallHost, Taken } from './calls.js';
import { MASK, type WorkerState } from './worker-state.js';
import { stopRunning } from './aborts.js';
import { RetryQueue, spent } from './redispatch.js';
import { PoolWorkers } from './worker-lives.js';
import { CALL_SLOTS, FAILED, BATCH_ITEMS, MAX_BATCH, NO_SLOT, OK, STOLEN, TARGET, genWord } from './messages.js';
import { stealForIdle, stealPending } from './steal.js';
import { runMessage } from './run-message.js';
import { PoolMeter, type PoolStats } from './pool-stats.js';

export interface SchedulerOptions {
  size: number;
  startMethod: StartMethod;
  initializer: TargetSpec | null;
  initargs: unknown[];
  /** Chunks a worker runs before it is replaced (Infinity: never). */
  maxTasks: number;
  /** Called once when the pool cannot go on (its initializer threw, workers keep dying at start). */
  onBroken(error: PoolBrokenError): void;
}

export class Scheduler implements CallHost {
  readonly size: number;
  readonly #set: PoolWorkers;
  readonly #ctl: Int32Array;
  readonly #workers: WorkerState[];
  readonly #maxTasks: number;
  /** Calls that may still give chunks, in the order they were made (CPython's task queue). */
  #queue: Call[] = [];
  /** Chunks taken back from dead workers, to send before anything else. */
  readonly #retry = new RetryQueue((call) => this.#chunkFinished(call));
  /** Calls with chunks outstanding or still to give: the pool is busy while there are any. */
  readonly #active = new Set<Call>();
  readonly #freeSlots: number[] = [];
  readonly #targets = new Map<string, number>();
  readonly #targetList: TargetSpec[] = [];
  /** Chunks taken from calls and not finished, over all calls. */
  #outstanding = 0;
  #pumping = false;
  #rotate = 0;
  #idle: (() => void) | null = null;
  readonly #meter: PoolMeter;

  constructor(options: SchedulerOptions) {
    const { size } = options;
    this.size = size;
    this.#maxTasks = options.maxTasks;
    // Not `options` in the closures below: it holds initargs, let go of at the end (pool/worker-lives.ts).
    const onBroken = options.onBroken;
    for (let s = CALL_SLOTS - 1; s >= 0; s--) this.#freeSlots.push(s);
    this.#set = new PoolWorkers({
      size,
      startMethod: options.startMethod,
      initializer: options.initializer,
      initargs: options.initargs,
      onDone: (id, m) => this.#onDone(id, m),
      // What it held goes back: begun chunks fail, the others go first (NOTE [Pool redispatch]).
      onExit: (id, w, progress, exit) => {
        this.#meter.failed += this.#retry.takeBack(id, w, progress, exit);
      },
      onReplaced: () => this.#pump(),
      onBroken: (error) => {
        for (const call of [...this.#active]) call.fail(error);
        onBroken(error);
      },
      onEnded: () => {
        // Nor for the calls whose chunks were at workers stopped by terminate() (their exits
        // are not reported: NOTE [Worker set]), which a pool kept by its user would keep.
        this.#retry.clear();
        this.#queue = [];
        this.#active.clear();
      },
    });
    this.#meter = new PoolMeter(size);
    this.#ctl = this.#set.ctl;
    this.#workers = this.#set.states;
  }

  /** The id of a task function, defined to each worker before its first chunk. */
  targetId(target: TargetSpec): number {
    const key = `${target.exportName}\0${target.module}\0${target.base}`;
    let id = this.#targets.get(key);
    if (id === undefined) {
      id = this.#targetList.length;
      this.#targetList.push(target);
      this.#targets.set(key, id);
    }
    return id;
  }

  /** Takes a new call's chunks in turn with those before it. */
  submit(call: Call, abortable: boolean, skippable: boolean): void {
    if (call.settled) return;
    if ((abortable || skippable) && this.#freeSlots.length > 0) {
      call.slot = this.#freeSlots.pop()!;
      call.gen = Atomics.load(this.#ctl, genWord(this.size, call.slot));
    }
    call.abortable = abortable;
    call.since = performance.now();
    this.#queue.push(call);
    this.#active.add(call);
    this.#pump();
  }

  /** PIDs (threadIds) of the workers now running. */
  pids(): number[] {
    return this.#set.pids();
  }

  /** pool.stats() (NOTE [Pool stats]): counters read, percentiles sorted now; nothing on a task's path. */
  stats(): PoolStats {
    let queued = this.#retry.tasks();
    for (const call of this.#queue) queued += call.queuedTasks();
    let inFlight = 0;
    for (const w of this.#workers) inFlight += w.tasksHeld();
    return {
      done: this.#meter.done,
      failed: this.#meter.failed,
      queued,
      inFlight,
      restarts: this.#set.restarts,
      runTime: this.#meter.run.percentiles(),
      waitTime: this.#meter.wait.percentiles(),
      workers: this.#meter.workers(this.#set.pidsById()),
    };
  }

  // --- CallHost ---------------------------------------------------------------------------

  wake(): void {
    this.#pump();
  }

  cancel(call: Call, kill: boolean): void {
    if (call.slot !== NO_SLOT) Atomics.add(this.#ctl, genWord(this.size, call.slot), 1);
    this.#retry.drop(call);
    call.exhausted = true;
    if (kill) stopRunning(call, this.#workers, this.#ctl, (id, signal) => this.#set.kill(id, signal));
    this.#checkDone(call);
  }

  // --- dispatch ---------------------------------------------------------------------------

  /** Gives each worker with room the next chunks (NOTE [Pool windows]). */
  #pump(): void {
    if (this.#pumping || this.#set.broken) return;
    this.#pumping = true;
    try {
      this.#distribute();
      // A worker still idle: nothing can be given to it now (no call has a chunk, or an imap
      // has as many out as its buffersize allows, some held by a busy worker): chunks another
      // holds and has not begun go to it (NOTE [Pool stealing]).
      const back = stealForIdle(this.#workers, this.#ctl);
      if (back.length > 0) {
        this.#retry.putBack(back);
        this.#distribute();
      }
      this.#rotate = (this.#rotate + 1) % this.size;
    } finally {
      this.#pumping = false;
    }
    // Outstanding chunks keep the process alive; a call waiting for its consumer does not.
    this.#set.keepAlive(this.#outstanding > 0);
  }

  /** One round of giving chunks to the workers with room. */
  #distribute(): void {
    // Which workers take chunks now: those with half their window back (so that batches
    // stay large), and idle ones at once.
    const taking: number[] = [];
    for (let n = 0; n < this.size; n++) {
      const id = (this.#rotate + n) % this.size;
      const w = this.#workers[id]!;
      const room = this.#room(w);
      if (w.alive && room > 0 && (room >= w.window >> 1 || w.inFlight() === 0)) taking.push(id);
    }
    // In rounds of half a window each, so that a few slow tasks spread over every worker
    // rather than filling the first ones' windows.
    while (taking.length > 0 && this.#hasWork()) {
      for (let k = 0; k < taking.length; k++) {
        const id = taking[k]!;
        const w = this.#workers[id]!;
        const room = this.#room(w);
        const sent = room > 0 && w.alive ? this.#fill(id, w, Math.min(room, Math.max(1, w.window >> 1), MAX_BATCH)) : 0;
        if (sent === 0 || sent === room) taking.splice(k--, 1);
      }
    }
  }

  /** How many more chunks worker `w` may be given now. */
  #room(w: WorkerState): number {
    if (stealPending(w)) return 0;
    return Math.min(w.window - w.inFlight(), this.#maxTasks - w.assigned);
  }

  #hasWork(): boolean {
    if (this.#retry.length > 0) return true;
    while (this.#queue.length > 0 && (this.#queue[0]!.exhausted || this.#queue[0]!.settled)) this.#queue.shift();
    return this.#queue.length > 0;
  }

  /** Sends worker `id` one batch of at most `max` chunks; returns how many. */
  #fill(id: number, w: WorkerState, max: number): number {
    for (let cap = max; ; cap = Math.max(1, cap >> 1)) {
      const taken = this.#takeBatch(w, cap);
      if (taken.length === 0) return 0;
      const batch = this.#encodeBatch(id, w, taken);
      // Not sent (items that cannot travel failed their calls, or too many descriptors):
      // the chunks are back in front; a smaller batch.
      if (batch === null) continue;
      const first = w.nextSeq;
      const now = performance.now();
      for (let k = 0; k < taken.length; k++) {
        const t = taken[k]!;
        if (t.call.abortable) {
          w.exclusive = t.call;
          w.exclusiveCount++;
        }
        const at = (first + k) & MASK;
        w.calls[at] = t.call;
        w.index[at] = t.index;
        w.kept[at] = t.call.retains ? t.kept : undefined;
        w.queuedAt[at] = t.call.queuedAt(now);
      }
      w.nextSeq = (first + taken.length) | 0;
      w.assigned += taken.length;
      // False: the worker is dead and its exit not seen yet; its exit sends these again.
      this.#set.sendFrame(id, batch);
      return taken.length;
    }
  }

  /**
   * The next chunks for worker `w`, retried ones first; each with its items. A worker that
   * holds chunks of a call with a signal gets only more of that call's (NOTE [Pool aborts]).
   */
  #takeBatch(w: WorkerState, max: number): Taken[] {
    const out: Taken[] = [];
    let only = this.#retry.take(out, max, w.exclusive);
    let items = 0;
    for (let q = 0; q < this.#queue.length && out.length < max && items < BATCH_ITEMS; ) {
      const call = this.#queue[q]!;
      if (call.settled || call.exhausted || (only !== null && call !== only)) {
        q++;
        continue;
      }
      const t = call.take();
      if (t === null) {
        q++; // nothing from it now: the next call's chunks may go
        this.#checkDone(call);
        continue;
      }
      call.inFlight++;
      this.#outstanding++;
      if (call.abortable) only = call;
      items += t.items.length;
      out.push(t);
    }
    return out;
  }

  /** The RUN frame of `taken` (after any TARGET it needs); null when it could not be made (NOTE [Pool redispatch]). */
  #encodeBatch(id: number, w: WorkerState, taken: Taken[]): Frame | null {
    for (const t of taken) {
      if (w.targets.has(t.call.target)) continue;
      const def = this.#targetList[t.call.target]!;
      this.#set.send(id, [TARGET, t.call.target, def.module, def.exportName, def.base]);
      w.targets.add(t.call.target);
    }
    try {
      return encodeMessage(runMessage(w.nextSeq, taken));
    } catch (e) {
      this.#retry.refuse(taken, e, (call) => this.cancel(call, false));
      return null;
    }
  }

  // --- results and exits ---------------------------------------------------------------------

  #onDone(id: number, m: unknown[]): void {
    const w = this.#workers[id]!;
    const first = m[1] as number;
    const count = m[2] as number;
    const values = m[4] as ArrayLike<unknown>; // an array, or packed numbers (NOTE [Packed numbers])
    const status = m[5] as number[] | null;
    const errors = m[6] as SerializedError[] | null;
    const elapsedUs = m[3] as number;
    // NOTE [Pool stats]: each chunk of the message as their mean, one after the other.
    const runMs = elapsedUs / 1000 / count;
    let begun = performance.now() - elapsedUs / 1000;
    this.#meter.busy(id, elapsedUs);
    let v = 0;
    let e = 0;
    for (let k = 0; k < count; k++) {
      const at = (first + k) & MASK;
      const call = w.calls[at];
      // Taken back for another worker, which this one then skipped (NOTE [Pool stealing]).
      if (call === null || call === undefined) continue;
      const index = w.index[at]!;
      const kept = w.kept[at];
      w.calls[at] = null;
      w.kept[at] = undefined;
      if (call === w.exclusive && --w.exclusiveCount === 0) w.exclusive = null;
      const st = status === null ? OK : status[k]!;
      const waitMs = begun - w.queuedAt[at]!;
      begun += runMs;
      if (st === STOLEN) {
        // In the range, and not run: it goes again, in front (still one of the call's in flight).
        w.assigned--;
        this.#retry.putBack([{ call, index, kept }]);
        continue;
      }
      if (st === OK) {
        const n = call.lengthOf(index, kept);
        if (!call.settled) call.done(index, values, v, n);
        v += n;
        this.#meter.chunk(id, n, true, runMs, waitMs);
      } else if (st === FAILED) {
        this.#meter.chunk(id, call.lengthOf(index, kept), false, runMs, waitMs);
        const err = errors![e++]!;
        if (!call.settled) call.failed(index, rebuildTaskError(err));
      }
      this.#chunkFinished(call);
    }
    w.doneSeq = (first + count) | 0;
    w.observe(elapsedUs, count);
    // maxtasksperchild: every chunk it was given is back; a new process takes its place.
    if (spent(w, this.#maxTasks)) this.#set.renew(id);
    this.#pump();
  }

  #chunkFinished(call: Call): void {
    call.inFlight--;
    this.#outstanding--;
    this.#checkDone(call);
  }

  /** A call with nothing outstanding and nothing more to give leaves the pool's work. */
  #checkDone(call: Call): void {
    if (call.inFlight > 0 || !(call.exhausted || call.settled) || !this.#active.delete(call)) return;
    if (call.slot !== NO_SLOT) {
      this.#freeSlots.push(call.slot);
      call.slot = NO_SLOT;
    }
    if (this.#outstanding === 0) this.#set.keepAlive(false);
    if (this.#active.size === 0) this.#idle?.();
  }

  // --- the end ----------------------------------------------------------------------------

  /** Resolves once no call has work left (close()). */
  idle(): Promise<void> {
    if (this.#active.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const prev = this.#idle;
      this.#idle = () => {
        this.#idle = prev;
        prev?.();
        resolve();
      };
    });
  }

  /** Asks the workers to stop (they have nothing to do), then as the worker set escalates. */
  stop(): Promise<void> {
    return this.#set.stop();
  }

  /** Stops the workers now: SIGTERM, then SIGKILL. Pending calls are the caller's to fail. */
  terminate(): Promise<void> {
    return this.#set.terminate();
  }

  /** Every call that has not settled (to fail them at terminate()). */
  pending(): Call[] {
    return [...this.#active].filter((c) => !c.settled);
  }
}
