// loader.stats() (API.md, "Observability"): counters kept as batches go, percentiles and
// shares computed only when asked (NOTE [Stats rings], workers/stats-ring.ts).
import { BusyClock, SampleRing, type Percentiles } from '../workers/stats-ring.js';

/** One worker's share in loader.stats(). */
export interface DataLoaderWorkerStats {
  readonly id: number;
  /** Its pid while it runs, else null. */
  readonly pid: number | null;
  /** Batches it made that were handed out, since its set of workers started. */
  readonly done: number;
  /** Its time making batches over the time since its set of workers started (or until it stopped), in [0, 1]. */
  readonly busy: number;
}

/** What loader.stats() returns: a plain object, a new one each call. */
export interface DataLoaderStats {
  /** Batches handed out, over the loader's life. */
  readonly done: number;
  /** Batches whose loading failed (threw, or were held by a worker that died and was not replaced). */
  readonly failed: number;
  /** Batches asked of the workers and not handed out yet (0 loading in this process, or between epochs). */
  readonly queued: number;
  /** Dead workers replaced (maxWorkerRestarts), over the loader's life. */
  readonly restarts: number;
  /** Time to make a batch (in its worker, or in this process), ms, over the last 1,000 batches. */
  readonly runTime: Percentiles;
  /** Time next() waited for a batch, ms, over the last 1,000 batches. */
  readonly waitTime: Percentiles;
  /** The workers of the running (or last) iteration; empty with numWorkers 0. */
  readonly workers: readonly DataLoaderWorkerStats[];
}

/** The loader's counters; iterations record into it, stats() reads it. */
export class LoaderStats {
  done = 0;
  failed = 0;
  restarts = 0;
  readonly #run = new SampleRing();
  readonly #wait = new SampleRing();
  #busy: BusyClock | null = null;
  #doneBy: Uint32Array = new Uint32Array(0);

  /** A new set of `n` workers started: shares start over. */
  workersStarted(n: number): void {
    this.#busy = new BusyClock(n);
    this.#doneBy = new Uint32Array(n);
  }

  workersStopped(): void {
    this.#busy?.stop();
  }

  /** A batch was made by `worker` (-1: this process) in `ms`. */
  made(worker: number, ms: number): void {
    this.#run.push(ms);
    if (worker >= 0) this.#busy?.add(worker, ms);
  }

  /** A batch was handed out after next() waited `ms`. */
  handedOut(worker: number, waitedMs: number): void {
    this.done++;
    this.#wait.push(waitedMs);
    if (worker >= 0 && worker < this.#doneBy.length) this.#doneBy[worker]!++;
  }

  read(queued: number, pid: (id: number) => number | null): DataLoaderStats {
    const workers: DataLoaderWorkerStats[] = [];
    for (let id = 0; id < this.#doneBy.length; id++) {
      workers.push({ id, pid: pid(id), done: this.#doneBy[id]!, busy: this.#busy?.share(id) ?? 0 });
    }
    return {
      done: this.done,
      failed: this.failed,
      queued,
      restarts: this.restarts,
      runTime: this.#run.percentiles(),
      waitTime: this.#wait.percentiles(),
      workers,
    };
  }
}
