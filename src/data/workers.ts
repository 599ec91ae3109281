// Loading in worker processes, parent side: torch's _MultiProcessingDataLoaderIter on the
// worker set (workers/worker-set.ts). worker-main.ts is the other side.
//
// NOTE [DataLoader workers]
// - Tasks: each request of the epoch's sampler becomes a task sent to one worker's inbox:
//   round-robin over the workers still active when batches go in order (torch), to the
//   worker holding the fewest tasks with `inOrder: false`. At most prefetchFactor x
//   numWorkers tasks exist at once, from sending until the batch is handed out (the ones
//   waiting in the reorder buffer count), so that many batches at most are in shared memory
//   on their way, whatever the user keeps. A new task is sent as soon as one is handed out.
// - Results come back on each worker's channel, in the order that worker loaded them. In
//   order: the next batch is the oldest task's; with `inOrder: false`, whichever arrived
//   first. An iterable dataset's worker that has no more says so for that task (`end`) and
//   gets no more tasks; the epoch ends when the sampler has, or every worker has, and no
//   task is left.
// - Failures end the iteration with a coded error: a batch that threw in its worker (the
//   worker, its indices and the child's stack; a full /dev/shm or the open-file limit keep
//   their own codes), a worker that died (its id, pid, signal or exit code and the indices
//   it held), no batch within `timeout`. With `maxWorkerRestarts`, a map-style dataset's dead
//   worker is replaced instead (same id and seed) and its unanswered tasks are sent to the
//   new one in order: loading a batch twice is harmless for map-style, and the epoch goes on.
//   The batches ready before a failure are still handed out (in order: up to the first one
//   missing); no task is sent after it.
// - Shutdown (torch's NOTE [Data Loader Multiprocessing Shutdown Logic], simpler here because
//   workers are separate processes that die with us): when an iteration ends, normally,
//   by break (the generator's finally) or by a failure, the batches already back are
//   released and the unanswered tasks are forgotten: their results, when they come, are
//   released on arrival. Then the workers are stopped (inbox closed, then SIGTERM, then
//   SIGKILL) and awaited, unless they are persistent and nothing failed: those are parked,
//   kept until loader.close(), and never keep the process alive while parked.
// - Where the workers run is a LoaderSet's (worker-host.ts): this host's worker set, or with
//   `cluster` the agents' and the head's own (NOTE [Cluster loader]); everything above is
//   the same for both, a lost host being one more coded failure (the set's `fail`).
// - The channels keep the process alive only while the loader waits for a batch: a
//   process whose iteration was abandoned half-way (an iterator dropped without return())
//   can still exit, and the workers die with it.

import { DataLoaderClosedError, DataLoaderTimeoutError } from '../errors.js';
import type { WorkerExit } from '../workers/worker-set.js';
import type { Epoch } from './epoch.js';
import type { FetchRequest } from './fetch.js';
import type { FromWorker, WorkerArgs, WorkerSpec } from './messages.js';
import type { ReplicaState } from './dataset-state.js';
import type { LoaderStats } from './loader-stats.js';
import { releaseTensors } from './release.js';
import { batchError, exitError, initError } from './worker-errors.js';
import type { StartMethod } from './options.js';
import { LoaderWorkerHost, type LoaderSet, type LoaderSetOptions } from './worker-host.js';

interface Task {
  readonly id: number;
  readonly pos: number;
  readonly req: FetchRequest;
  worker: number;
  /** The pid of the worker that answered. */
  pid: number;
  outcome: FromWorker | null;
}

export interface WorkersOptions {
  spec: WorkerSpec;
  prefetchFactor: number;
  inOrder: boolean;
  timeout: number;
  persistent: boolean;
  maxWorkerRestarts: number;
  startMethod: StartMethod;
  /** The replicas' states the workers load as they start (NOTE [Resumable datasets]); null: none. */
  restore: readonly (ReplicaState | null)[] | null;
  /** The loader's counters (loader.stats()). */
  stats: LoaderStats;
  /**
   * Where the workers run (NOTE [Cluster loader]): absent, on this host. `fail` ends the
   * iteration with a coded error (a host lost: HostLostError).
   */
  makeSet?: (o: LoaderSetOptions, fail: (e: Error) => void) => LoaderSet;
}

export class LoaderWorkers {
  readonly baseSeed: number;
  readonly #o: WorkersOptions;
  readonly #set: LoaderSet;
  readonly #n: number;
  /** Tasks of the running iteration, until handed out. */
  readonly #tasks = new Map<number, Task>();
  /** Per worker: its unanswered tasks in the order sent, and whether it may get more. */
  readonly #held: number[][];
  readonly #active: boolean[];
  #arrivals: number[] = [];
  #nextTask = 0;
  #next = 0; // round-robin position
  #wake: (() => void) | null = null;
  #failure: Error | null = null;
  #running = false;
  #stopped = false;
  #epochs = 0;
  #restarts = 0;
  /** The epoch running (its replicas' states start a replaced worker), or null. */
  #epoch: Epoch | null = null;
  /** While a persistent epoch begins: the parked workers that have not answered `resume` yet. */
  #resuming: Set<number> | null = null;

  constructor(o: WorkersOptions) {
    this.#o = o;
    this.baseSeed = o.spec.baseSeed;
    this.#n = o.spec.numWorkers;
    this.#held = Array.from({ length: this.#n }, () => []);
    this.#active = new Array<boolean>(this.#n).fill(true);
    const setOptions: LoaderSetOptions = {
      size: this.#n,
      startMethod: o.startMethod,
      // A replaced worker starts from its id's last snapshot (NOTE [Resumable datasets]).
      args: (id): WorkerArgs => [o.spec, this.#epoch?.replica(id) ?? o.restore?.[id] ?? null],
      onMessage: (id, m) => this.#onMessage(id, m as FromWorker),
      onExit: (id, exit) => this.#onExit(id, exit),
    };
    this.#set = o.makeSet ? o.makeSet(setOptions, (e) => this.#lost(e)) : new LoaderWorkerHost(setOptions);
    o.stats.workersStarted(this.#n);
  }

  /** Batches asked of the workers and not handed out yet (loader.stats()). */
  get queued(): number {
    return this.#tasks.size;
  }

  pid(id: number): number | null {
    return this.#set.pid(id);
  }

  get pids(): number[] {
    const out: number[] = [];
    for (let id = 0; id < this.#n; id++) {
      const pid = this.#set.pid(id);
      if (pid !== null && (this.#set.isHere?.(id) ?? true)) out.push(pid);
    }
    return out;
  }

  /** False once stopped, or failed: a loader then makes a new set of workers. */
  get usable(): boolean {
    return this.#failure === null && !this.#stopped;
  }

  #wakeUp(): void {
    const w = this.#wake;
    this.#wake = null;
    w?.();
  }

  #fail(e: Error): void {
    this.#failure ??= e;
    this.#wakeUp();
  }

  /** The set lost workers it cannot replace (a host): what they held is lost with them. */
  #lost(e: Error): void {
    if (this.#stopped || this.#failure !== null) return;
    if (this.#running) for (const h of this.#held) this.#o.stats.failed += h.length;
    this.#fail(e);
  }

  #onMessage(id: number, m: FromWorker): void {
    if (m.kind === 'resumed') {
      this.#epoch?.setReplica(id, m.state);
      this.#resuming?.delete(id);
      return this.#wakeUp();
    }
    if (m.kind === 'error' && m.task === null) return this.#fail(initError(id, this.#set.pid(id), m));
    if (m.kind === 'batch') this.#o.stats.made(id, m.ms);
    const task = this.#tasks.get(m.task as number);
    if (task === undefined || task.worker !== id) {
      // A result of an iteration that ended before it came (NOTE [DataLoader workers]).
      if (m.kind === 'batch') releaseTensors(m.data);
      return;
    }
    const held = this.#held[id]!;
    const at = held.indexOf(task.id);
    if (at >= 0) held.splice(at, 1);
    if (m.kind === 'end') this.#active[id] = false;
    task.pid = this.#set.pid(id) ?? -1;
    task.outcome = m;
    this.#arrivals.push(task.id);
    this.#wakeUp();
  }

  #onExit(id: number, exit: WorkerExit): void {
    if (this.#stopped || this.#failure !== null) return;
    if (this.#resuming?.delete(id)) return this.#wakeUp(); // died while parked: replaced by #resumeParked
    const pending = this.#held[id]!.splice(0);
    if (!this.#running) return; // parked: replaced when the next epoch starts
    if (this.#o.spec.kind === 'map' && this.#restarts < this.#o.maxWorkerRestarts) {
      this.#restarts++;
      this.#o.stats.restarts++;
      process.emitWarning(
        `tensorproc: ${exitError(id, exit, []).message} It was replaced (restart ${this.#restarts} of ${this.#o.maxWorkerRestarts}) and its ${pending.length} unfinished batches sent to the new worker.`,
        'TensorprocWarning',
      );
      this.#set.replace(id);
      for (const t of pending) this.#send(id, this.#tasks.get(t)!);
      return;
    }
    this.#o.stats.failed += pending.length;
    this.#fail(
      exitError(
        id,
        exit,
        pending.map((t) => this.#tasks.get(t)?.req ?? null),
      ),
    );
  }

  #send(worker: number, task: Task): void {
    task.worker = worker;
    this.#held[worker]!.push(task.id);
    // False when that worker is gone: its exit, reported next, deals with the task.
    this.#set.send(worker, { kind: 'fetch', task: task.id, req: task.req });
  }

  /** Where the next task goes, or -1 when no worker is active. */
  #pick(): number {
    let best = -1;
    for (let k = 0; k < this.#n; k++) {
      const w = (this.#next + k) % this.#n;
      if (!this.#active[w]) continue;
      if (this.#o.inOrder) {
        best = w;
        break;
      }
      if (best < 0 || this.#held[w]!.length < this.#held[best]!.length) best = w;
    }
    if (best >= 0) this.#next = (best + 1) % this.#n;
    return best;
  }

  /** Resolves when a message or exit arrives; fails the iteration after `ms` (timeout) without one. */
  async #news(ms: number): Promise<void> {
    this.#set.keepAlive(true);
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        if (ms > 0) {
          timer = setTimeout(
            () =>
              this.#fail(
                new DataLoaderTimeoutError(
                  `DataLoader timed out after ${this.#o.timeout} ms waiting for a batch from its workers. ` +
                    'Raise `timeout` for datasets that are slow to load, or set it to 0 to wait as long as it takes.',
                ),
              ),
            ms,
          );
        }
      });
    } finally {
      clearTimeout(timer);
      this.#set.keepAlive(false);
    }
  }

  /**
   * Before a persistent epoch sends anything: each parked worker answers a `resume` (and an
   * iterable dataset's starts over), and one that died while parked is replaced. Its exit may
   * not have been reported yet when the epoch begins; the round trip waits for it, so that
   * the new epoch's batches never go to a worker that is already gone.
   */
  async #resumeParked(): Promise<void> {
    const waiting = new Set<number>();
    this.#resuming = waiting;
    try {
      for (let id = 0; id < this.#n; id++) {
        if (!this.#set.isAlive(id)) continue;
        // A send that fails (false) found the worker gone: its exit, reported next, answers for it.
        this.#set.send(id, { kind: 'resume', reset: this.#o.spec.kind === 'iterable' });
        waiting.add(id);
      }
      while (waiting.size > 0 && this.#failure === null) await this.#news(this.#o.timeout);
    } finally {
      this.#resuming = null;
    }
    if (this.#failure !== null) throw this.#failure;
    for (let id = 0; id < this.#n; id++) if (!this.#set.isAlive(id)) this.#set.replace(id);
  }

  /** One epoch's batches, as NOTE [DataLoader workers] says. `done` is called when it ran to its end. */
  async *run(epoch: Epoch, wrap: (b: unknown) => unknown, done: () => void): AsyncGenerator<unknown> {
    this.#running = true;
    this.#epoch = epoch;
    this.#restarts = 0;
    this.#active.fill(true);
    if (this.#o.inOrder && epoch.resumeWorker !== null) this.#next = epoch.resumeWorker;
    const limit = this.#o.prefetchFactor * this.#n;
    const order: Task[] = [];
    let head = 0;
    let exhausted = false;
    const put = (): void => {
      while (!exhausted && this.#failure === null && this.#tasks.size < limit) {
        const w = this.#pick();
        const planned = w < 0 ? undefined : epoch.next();
        if (planned === undefined) {
          exhausted = true;
          break;
        }
        const task: Task = { id: this.#nextTask++, pos: planned.pos, req: planned.req, worker: w, pid: -1, outcome: null };
        this.#tasks.set(task.id, task);
        order.push(task);
        this.#send(w, task);
      }
    };
    try {
      if (this.#epochs++ > 0) await this.#resumeParked();
      put();
      let waitingSince = -1;
      let asked = performance.now(); // when next() began waiting (loader.stats().waitTime)
      for (;;) {
        if (this.#stopped) throw this.#failure; // closed: nothing more is handed out
        let task: Task | undefined;
        if (this.#o.inOrder) {
          if (head < order.length && order[head]!.outcome !== null) task = order[head++];
        } else {
          const id = this.#arrivals.shift();
          task = id === undefined ? undefined : this.#tasks.get(id);
        }
        if (task === undefined) {
          // What was ready before a failure is handed out first, in order; then it is thrown.
          if (this.#failure) throw this.#failure;
          if (exhausted && this.#tasks.size === 0) break;
          if (waitingSince < 0) waitingSince = performance.now();
          await this.#news(this.#o.timeout > 0 ? Math.max(1, this.#o.timeout - (performance.now() - waitingSince)) : 0);
          continue;
        }
        waitingSince = -1;
        this.#tasks.delete(task.id);
        const o = task.outcome!;
        if (o.kind === 'error') {
          this.#o.stats.failed++;
          throw batchError(task.worker, task.pid, task.req, o);
        }
        put();
        if (o.kind === 'end') continue;
        const data = (o as { data: unknown }).data;
        if (epoch.discard > 0) {
          epoch.discard--;
          releaseTensors(data);
          continue;
        }
        epoch.handedOut(task.pos, task.worker, (o as { state: ReplicaState | null }).state);
        this.#o.stats.handedOut(task.worker, performance.now() - asked);
        yield wrap(data);
        asked = performance.now();
      }
      done();
    } finally {
      await this.#endIteration();
    }
  }

  async #endIteration(): Promise<void> {
    this.#running = false;
    this.#epoch = null;
    for (const t of this.#tasks.values()) if (t.outcome?.kind === 'batch') releaseTensors(t.outcome.data);
    this.#tasks.clear();
    this.#arrivals = [];
    for (const h of this.#held) h.length = 0;
    if (!this.#o.persistent || this.#failure !== null) await this.stop();
  }

  /** Stops every worker and waits for them (NOTE [DataLoader workers]). */
  async stop(): Promise<void> {
    if (this.#running)
      this.#fail(new DataLoaderClosedError('The DataLoader was closed while this iteration was running: its workers are stopped.'));
    this.#stopped = true;
    this.#o.stats.workersStopped();
    this.#wakeUp();
    await this.#set.stop({ grace: 1000 });
  }
}
