// The Pool's workers through their lives, parent side: started with the pool's start
// arguments (the control block, the initializer), READY and INIT_FAILED, a worker that ended
// replaced (or the pool given up on when workers keep ending before they are ready, or its
// initializer threw), a worker that ran its maxtasksperchild share replaced, and all of them
// stopped. Which chunks each holds, and what comes back, is the scheduler's
// (pool/scheduler.ts); the processes and their channels are the worker set's (NOTE [Worker set]).
import type { Frame } from '../transport/index.js';
import type { TargetSpec } from '../process/target.js';
import type { StartMethod } from '../process/index.js';
import { PoolBrokenError } from '../errors.js';
import type { SerializedError } from '../process/messages.js';
import { WorkerSet, type WorkerExit } from '../workers/worker-set.js';
import { ControlBlock } from './control-block.js';
import { rebuildTaskError } from './task-error.js';
import type { PoolWorkerStart } from './worker-main.js';
import { WorkerState } from './worker-state.js';
import { DONE, INIT_FAILED, READY, controlWords } from './messages.js';

// The worker's program (src/programs/), by path: a worker child loads it as its target.
const MAIN = {
  module: new URL(`../programs/pool-worker${import.meta.url.slice(import.meta.url.lastIndexOf('.'))}`, import.meta.url),
  export: 'main',
};
/** Workers that die one after another before they are ready, before the pool gives up. */
const MAX_START_FAILURES = 3;

export interface PoolWorkersOptions extends PoolWorkerEvents {
  size: number;
  startMethod: StartMethod;
  initializer: TargetSpec | null;
  initargs: unknown[];
}

/** What the scheduler hears of the workers. */
export interface PoolWorkerEvents {
  /** A DONE from worker `id` (NOTE [Pool protocol]). */
  onDone(id: number, message: unknown[]): void;
  /** Worker `id` ended, its progress word `progress`: what it held is taken back, before anything else. */
  onExit(id: number, w: WorkerState, progress: number, exit: WorkerExit): void;
  /** A new worker took an id's place: it has room for chunks. */
  onReplaced(): void;
  /** The pool cannot go on (once); the workers are being stopped. */
  onBroken(error: PoolBrokenError): void;
  /** Every worker has exited (stop() or terminate()): nothing is held for them any more. */
  onEnded(): void;
}

export class PoolWorkers {
  readonly size: number;
  /** Workers replaced so far (pool.stats()). */
  restarts = 0;
  /** What the scheduler knows of each worker id (pool/worker-state.ts). */
  readonly states: WorkerState[];
  /** NOTE [Pool control block]: progress words first, then call generations. */
  readonly ctl: Int32Array;
  readonly #control: ControlBlock;
  readonly #set: WorkerSet;
  readonly #opts: PoolWorkerEvents;
  #start: PoolWorkerStart | null;
  #startFailures = 0;
  #broken = false;
  #stopping: Promise<void> | null = null;

  constructor(options: PoolWorkersOptions) {
    const { size } = options;
    this.size = size;
    // The events only: the start arguments (initargs' tensors among them) are let go at the end.
    const { onDone, onExit, onReplaced, onBroken, onEnded } = options;
    this.#opts = { onDone, onExit, onReplaced, onBroken, onEnded };
    this.#control = ControlBlock.create(controlWords(size));
    this.ctl = this.#control.words;
    // Progress words start at -1: no chunk started (NOTE [Pool control block]).
    this.ctl.fill(-1, 0, size);
    this.states = Array.from({ length: size }, () => new WorkerState());
    this.#start = { control: this.#control, size, initializer: options.initializer, initargs: options.initargs };
    try {
      this.#set = new WorkerSet({
        main: MAIN,
        size,
        startMethod: options.startMethod,
        args: () => [this.#start],
        onMessage: (id, m) => this.#onMessage(id, m as unknown[]),
        onExit: (id, exit) => this.#onExit(id, exit),
      });
    } catch (e) {
      this.#control.close();
      throw e;
    }
  }

  /** The pool has failed (PoolBrokenError): no chunk goes to a worker any more. */
  get broken(): boolean {
    return this.#broken;
  }

  /** stop() or terminate() was called: ended workers are not replaced. */
  get stopping(): boolean {
    return this.#stopping !== null;
  }

  send(id: number, value: unknown): void {
    this.#set.send(id, value);
  }

  /** False: the worker is dead and its exit not seen yet (its exit gives back what it held). */
  sendFrame(id: number, frame: Frame): boolean {
    return this.#set.sendFrame(id, frame);
  }

  kill(id: number, signal: NodeJS.Signals): void {
    this.#set.kill(id, signal);
  }

  /** Whether the workers keep the parent alive (chunks outstanding: NOTE [Worker set]). */
  keepAlive(on: boolean): void {
    this.#set.keepAlive(on);
  }

  /** PIDs (threadIds) of the workers now running. */
  pids(): number[] {
    const out: number[] = [];
    for (let id = 0; id < this.size; id++) {
      const pid = this.#set.pid(id);
      if (pid !== null) out.push(pid);
    }
    return out;
  }

  /** Each worker id's current pid (threadId), null where none runs. */
  pidsById(): (number | null)[] {
    const out: (number | null)[] = [];
    for (let id = 0; id < this.size; id++) out.push(this.#set.pid(id));
    return out;
  }

  /** A new process for worker id `id` (maxtasksperchild: every chunk it was given is back); none once stopping. */
  renew(id: number): void {
    if (this.#stopping) return;
    this.restarts++;
    this.#set.replace(id);
    this.states[id]!.reset();
  }

  #onMessage(id: number, m: unknown[]): void {
    switch (m[0]) {
      case DONE:
        this.#opts.onDone(id, m);
        break;
      case READY:
        this.states[id]!.ready = true;
        this.#startFailures = 0;
        break;
      case INIT_FAILED: {
        const cause = rebuildTaskError(m[1] as SerializedError);
        this.fail(
          new PoolBrokenError(
            `The pool's initializer threw in worker ${id}: ${cause.message}. The pool cannot run tasks; fix the initializer and make a new Pool.`,
            { cause },
          ),
        );
        break;
      }
    }
  }

  #onExit(id: number, exit: WorkerExit): void {
    const w = this.states[id]!;
    w.alive = false;
    if (w.killTimer !== null) clearTimeout(w.killTimer);
    w.killTimer = null;
    this.#opts.onExit(id, w, Atomics.load(this.ctl, id), exit);
    if (this.#broken || this.#stopping) return;
    if (!w.ready && !w.stoppedForAbort && ++this.#startFailures >= MAX_START_FAILURES) {
      this.fail(
        new PoolBrokenError(
          `${MAX_START_FAILURES} workers in a row ended before they were ready (the last: ${exit.error?.message ?? `exit code ${exit.exitCode}`}); the pool stops trying.`,
          { cause: exit.error },
        ),
      );
      return;
    }
    this.renew(id);
    this.#opts.onReplaced();
  }

  /** The pool cannot go on: onBroken once, then the workers are stopped. */
  fail(error: PoolBrokenError): void {
    if (this.#broken) return;
    this.#broken = true;
    this.#opts.onBroken(error);
    // Asked, not signalled: a worker still importing its initializer's module finishes that
    // first (a thread stopped while its loader has a file open leaks that descriptor).
    void this.stop();
  }

  /** Asks the workers to stop (they have nothing to do), then as the worker set escalates. */
  stop(): Promise<void> {
    this.#stopping ??= this.#set.stop().finally(() => this.#ended());
    return this.#stopping;
  }

  /** Stops the workers now: SIGTERM, then SIGKILL. */
  terminate(): Promise<void> {
    this.#stopping ??= this.#set.terminate().finally(() => this.#ended());
    return this.#stopping;
  }

  /** Nothing is held for new workers any more (the initializer's arguments' tensors among it). */
  #ended(): void {
    this.#control.close();
    this.#start = null;
    for (const w of this.states) w.clear();
    this.#opts.onEnded();
  }
}
