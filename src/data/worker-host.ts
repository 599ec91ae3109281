// The DataLoader's workers on one host: a worker set running the data worker's program, each
// process started with the loader's glibc settings (NOTE [Worker malloc]). LoaderWorkers
// (workers.ts) uses one for a local loader; a cluster loader (NOTE [Cluster loader]) uses one
// on each host, the head's own and every agent's, reached from the cluster entry through the
// public index (its only way into the core: NOTE [The package bundle]).
import { WorkerSet, type StopOptions, type WorkerExit } from '../workers/worker-set.js';
import type { StartMethod } from './options.js';
import { withWorkerTunables } from './worker-tunables.js';

/** What LoaderWorkers needs of its workers, wherever they run (this host, or a cluster's). */
export interface LoaderSet {
  /** Worker `id`'s pid on its own host, null while starting or after its exit. */
  pid(id: number): number | null;
  isAlive(id: number): boolean;
  /** False when the worker is known gone (its exit is, or will be, reported). */
  send(id: number, value: unknown): boolean;
  /** A new worker for `id` (its start arguments asked again). */
  replace(id: number): void;
  keepAlive(on: boolean): void;
  stop(options?: StopOptions): Promise<void>;
  /** Whether worker `id` runs on this host (loader.workerPids lists only those). */
  isHere?(id: number): boolean;
}

export interface LoaderSetOptions {
  size: number;
  startMethod: StartMethod;
  /** Worker `id`'s start arguments (WorkerArgs), asked at each start of it. */
  args(id: number): readonly unknown[];
  onMessage(id: number, message: unknown): void;
  onExit(id: number, exit: WorkerExit): void;
}

const EXT = import.meta.url.slice(import.meta.url.lastIndexOf('.'));
// The worker's program (src/programs/), by path: a worker child loads it as its target.
const MAIN = { module: new URL(`../programs/data-worker${EXT}`, import.meta.url), export: 'main' };

/** Internal (exported for tensorproc/cluster): DataLoader workers on this host. */
export class LoaderWorkerHost implements LoaderSet {
  readonly #set: WorkerSet;

  constructor(o: LoaderSetOptions) {
    this.#set = withWorkerTunables(
      () =>
        new WorkerSet({
          main: MAIN,
          size: o.size,
          startMethod: o.startMethod,
          args: (id) => o.args(id),
          onMessage: (id, m) => o.onMessage(id, m),
          onExit: (id, exit) => o.onExit(id, exit),
        }),
    );
  }

  pid(id: number): number | null {
    return this.#set.pid(id);
  }

  isAlive(id: number): boolean {
    return this.#set.isAlive(id);
  }

  send(id: number, value: unknown): boolean {
    return this.#set.send(id, value);
  }

  replace(id: number): void {
    withWorkerTunables(() => this.#set.replace(id));
  }

  keepAlive(on: boolean): void {
    this.#set.keepAlive(on);
  }

  stop(options?: StopOptions): Promise<void> {
    return this.#set.stop(options);
  }

  terminate(options?: StopOptions): Promise<void> {
    return this.#set.terminate(options);
  }
}
