// Pool: torch.multiprocessing.Pool (CPython's multiprocessing.pool.Pool) for Node, with
// tensors shared both ways. The calls and their checks live here; which worker runs what,
// and what a worker's death costs, in pool/scheduler.ts.
import { availableParallelism } from 'node:os';
import { AbortError, InvalidArgumentError, PoolBrokenError, PoolClosedError, PoolRunningError, PoolTerminatedError } from '../errors.js';
import { checkTarget, type Target, type TargetSpec } from '../process/target.js';
import type { StartMethod } from '../process/index.js';
import { defaultChunksize, type Call } from './calls.js';
import { ListCall } from './list-call.js';
import { IterCall } from './iter-call.js';
import { Scheduler } from './scheduler.js';
import type { PoolStats } from './pool-stats.js';
import { emptyStats, loadRemotePool, type ClusterOptions, type RemoteImapOptions, type RemotePool } from './cluster-link.js';

export interface PoolOptions {
  /** How many workers. Default os.availableParallelism(). */
  processes?: number | null;
  /** Called in each worker as fn(...initargs) before its first task; if it throws, the pool fails (PoolBrokenError). */
  initializer?: Target | null;
  initargs?: readonly unknown[];
  /** Tasks (chunks) a worker runs before a new process takes its place. Default: no limit. */
  maxtasksperchild?: number | null;
  /** 'spawn' (default: a process per worker) or 'thread' (a worker thread each). */
  startMethod?: StartMethod;
  /**
   * Run the workers on a cluster's agents instead of here (docs/cluster.md, NOTE [Cluster
   * pool]): targets are then modules under `cluster.root`. Needs tensorproc/cluster's NATS client.
   */
  cluster?: ClusterOptions | null;
}

export interface CallOptions {
  /** Aborts the call: its queued tasks are dropped, a worker running one is stopped and replaced. */
  signal?: AbortSignal;
}

export interface MapOptions extends CallOptions {
  /** Items per task. Default for map/starmap: CPython's, ceil(n / (4 × processes)); for imap: 1. */
  chunksize?: number;
}

export interface ImapOptions extends MapOptions {
  /** At most this many tasks are read from the input ahead of the consumer. Default max(64, 16 × processes). */
  buffersize?: number;
}

type State = 'running' | 'closed' | 'terminated' | 'broken';

export class Pool implements AsyncDisposable {
  /** The number of workers. */
  readonly processes: number;
  // Null for a cluster pool, whose calls all go to #remote (NOTE [Cluster pool]).
  readonly #scheduler!: Scheduler;
  readonly #remote: Promise<RemotePool> | null = null;
  /** #remote once loaded, for the synchronous stats() and pids(). */
  #remoteNow: RemotePool | null = null;
  #state: State = 'running';
  #broken: PoolBrokenError | null = null;
  /** Settles once the workers are gone (after close() and the calls' end, or terminate()). */
  #joined: Promise<void> | null = null;

  constructor(options: number | PoolOptions = {}) {
    const o: PoolOptions = typeof options === 'number' ? { processes: options } : options;
    if (o === null || typeof o !== 'object')
      throw new InvalidArgumentError('new Pool(options): options must be a number of processes or an object.');
    const processes = o.processes ?? availableParallelism();
    if (!Number.isInteger(processes) || processes < 1) {
      throw new InvalidArgumentError(`Pool: processes must be a positive integer (got ${String(processes)}).`);
    }
    const maxTasks = o.maxtasksperchild ?? Infinity;
    if (maxTasks !== Infinity && (!Number.isInteger(maxTasks) || maxTasks < 1)) {
      throw new InvalidArgumentError(`Pool: maxtasksperchild must be a positive integer, or null for no limit (got ${String(maxTasks)}).`);
    }
    const startMethod = o.startMethod ?? 'spawn';
    if (startMethod !== 'spawn' && startMethod !== 'thread') {
      throw new InvalidArgumentError(`Pool: startMethod must be 'spawn' or 'thread' (got ${String(startMethod)}).`);
    }
    const initargs = o.initargs ?? [];
    if (!Array.isArray(initargs))
      throw new InvalidArgumentError('Pool: initargs must be an array: the initializer is called as fn(...initargs).');
    const initializer: TargetSpec | null = o.initializer == null ? null : checkTarget(o.initializer);
    this.processes = processes;
    if (o.cluster != null) {
      if (typeof o.cluster !== 'object' || o.cluster.servers === undefined)
        throw new InvalidArgumentError("Pool: cluster must be { servers: 'nats://host:4222' | string[], root? } (docs/cluster.md).");
      this.#remote = loadRemotePool({
        processes,
        cluster: o.cluster,
        initializer: o.initializer ?? null,
        initargs: [...initargs],
        maxtasksperchild: maxTasks === Infinity ? null : maxTasks,
      });
      this.#remote.then(
        (r) => (this.#remoteNow = r),
        () => {}, // its error is each call's
      );
      return;
    }
    this.#scheduler = new Scheduler({
      size: processes,
      startMethod,
      initializer,
      initargs: [...initargs],
      maxTasks,
      onBroken: (error) => {
        if (this.#state === 'running' || this.#state === 'closed') this.#state = 'broken';
        this.#broken = error;
        this.#joined ??= this.#scheduler.stop();
      },
    });
  }

  /** fn(item) for each item, in the workers; the results in order. */
  map<R = unknown>(target: Target, iterable: Iterable<unknown> | AsyncIterable<unknown>, options: MapOptions = {}): Promise<R[]> {
    return this.#list(target, iterable, options, 'map') as Promise<R[]>;
  }

  /** fn(...args) for each array of arguments; the results in order. */
  starmap<R = unknown>(
    target: Target,
    iterable: Iterable<readonly unknown[]> | AsyncIterable<readonly unknown[]>,
    options: MapOptions = {},
  ): Promise<R[]> {
    return this.#list(target, iterable, options, 'starmap') as Promise<R[]>;
  }

  /** fn(...args) in a worker; its result. */
  apply<R = unknown>(target: Target, args: readonly unknown[] = [], options: CallOptions = {}): Promise<R> {
    try {
      if (!Array.isArray(args))
        throw new InvalidArgumentError('apply(target, args): args must be an array: the task is called as fn(...args).');
      if (this.#remote !== null) {
        this.#check();
        checkCallOptions(options);
        return this.#remote.then((r) => r.apply(target, args, options.signal)) as Promise<R>;
      }
      return this.#start(target, [args], 1, options, true, true) as Promise<R>;
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** fn(item) for each item, as an async iterable of the results in order; the input is read lazily. */
  imap<R = unknown>(
    target: Target,
    iterable: Iterable<unknown> | AsyncIterable<unknown>,
    options: ImapOptions = {},
  ): AsyncIterableIterator<R> {
    return this.#iter(target, iterable, options, true) as AsyncIterableIterator<R>;
  }

  /** imap(), the results as they finish. */
  imapUnordered<R = unknown>(
    target: Target,
    iterable: Iterable<unknown> | AsyncIterable<unknown>,
    options: ImapOptions = {},
  ): AsyncIterableIterator<R> {
    return this.#iter(target, iterable, options, false) as AsyncIterableIterator<R>;
  }

  async #list(target: Target, iterable: unknown, options: MapOptions, what: 'map' | 'starmap'): Promise<unknown> {
    this.#check();
    checkCallOptions(options);
    if (this.#remote !== null) {
      const src = Array.isArray(iterable) ? iterable : isIterable(iterable) ? Array.from(iterable) : null;
      if (src === null) throw new InvalidArgumentError(`${what}(target, iterable): a cluster pool takes an array or an iterable.`);
      if (options.chunksize !== undefined) checkCount(options.chunksize, 'chunksize');
      return (await this.#remote).map(target, src, options.chunksize, what === 'starmap', options.signal);
    }
    let src: readonly unknown[];
    if (Array.isArray(iterable)) src = iterable;
    else if (isIterable(iterable)) src = Array.from(iterable);
    else if (isAsyncIterable(iterable)) {
      // As CPython turns any iterable into a list first: map needs the length for its chunksize.
      src = [];
      for await (const x of iterable) (src as unknown[]).push(x);
      this.#check();
    } else
      throw new InvalidArgumentError(
        `${what}(target, iterable): iterable must be an array, an iterable or an async iterable (got ${typeOf(iterable)}).`,
      );
    if (what === 'starmap') {
      for (let i = 0; i < src.length; i++) {
        if (!Array.isArray(src[i]))
          throw new InvalidArgumentError(
            `starmap(target, iterable): each item must be an array of arguments (item ${i} is ${typeOf(src[i])}).`,
          );
      }
    }
    const chunksize = options.chunksize ?? defaultChunksize(src.length, this.processes);
    checkCount(chunksize, 'chunksize');
    return this.#start(target, src, chunksize, options, what === 'starmap', false);
  }

  #start(
    target: Target,
    src: readonly unknown[],
    chunksize: number,
    options: CallOptions,
    star: boolean,
    single: boolean,
  ): Promise<unknown> {
    this.#check();
    checkCallOptions(options);
    const id = this.#scheduler.targetId(checkTarget(target));
    const call = new ListCall(this.#scheduler, id, star, src, chunksize, single);
    this.#submit(call, options.signal, src.length > chunksize);
    return call.promise;
  }

  #iter(target: Target, iterable: unknown, options: ImapOptions, ordered: boolean): AsyncIterableIterator<unknown> {
    this.#check();
    checkCallOptions(options);
    const what = ordered ? 'imap' : 'imapUnordered';
    if (!isIterable(iterable) && !isAsyncIterable(iterable)) {
      throw new InvalidArgumentError(
        `${what}(target, iterable): iterable must be an iterable or an async iterable (got ${typeOf(iterable)}).`,
      );
    }
    const chunksize = options.chunksize ?? 1;
    checkCount(chunksize, 'chunksize');
    const ahead = options.buffersize ?? Math.max(64, 16 * this.processes);
    checkCount(ahead, 'buffersize');
    if (this.#remote !== null) return remoteIter(this.#remote, target, iterable, { chunksize, ahead, ordered, signal: options.signal });
    const id = this.#scheduler.targetId(checkTarget(target));
    const call = new IterCall(this.#scheduler, id, iterable, chunksize, ordered, ahead);
    this.#submit(call, options.signal, true);
    return call;
  }

  #submit(call: Call, signal: AbortSignal | undefined, skippable: boolean): void {
    if (signal?.aborted) {
      call.fail(new AbortError(undefined, { cause: signal.reason }));
      return;
    }
    call.listen(signal);
    this.#scheduler.submit(call, signal !== undefined, skippable);
  }

  #check(): void {
    if (this.#state === 'running') return;
    if (this.#state === 'broken') throw new PoolBrokenError(this.#broken!.message, { cause: this.#broken!.cause });
    throw new PoolClosedError(
      `This pool was ${this.#state === 'closed' ? 'closed' : 'terminated'}: it takes no more tasks. Make a new Pool, or call close() only once everything has been given to it.`,
    );
  }

  /** No more calls; the workers stop once the calls made so far have finished (join() waits for that). */
  close(): void {
    if (this.#state !== 'running') return;
    this.#state = 'closed';
    if (this.#remote !== null) {
      this.#joined = this.#remote.then(
        (r) => {
          r.close();
          return r.join();
        },
        () => {},
      );
      return;
    }
    this.#joined = this.#scheduler.idle().then(() => this.#scheduler.stop());
  }

  /**
   * Stops the workers now (SIGTERM, then SIGKILL): every call not finished rejects with
   * PoolTerminatedError. join() waits for the workers to be gone.
   */
  terminate(): void {
    if (this.#state === 'terminated') return;
    const wasBroken = this.#state === 'broken';
    this.#state = 'terminated';
    if (this.#remote !== null) {
      this.#joined = this.#remote.then(
        (r) => {
          r.terminate();
          return r.join();
        },
        () => {},
      );
      return;
    }
    if (!wasBroken) {
      const error = new PoolTerminatedError('The pool was terminated before this call finished: its tasks were stopped.');
      for (const call of this.#scheduler.pending()) {
        this.#scheduler.cancel(call, false);
        call.fail(error);
      }
    }
    this.#joined = this.#scheduler.terminate();
  }

  /** Waits for the workers to exit, after close() or terminate(); PoolRunningError before. */
  join(): Promise<void> {
    if (this.#joined === null) {
      return Promise.reject(
        new PoolRunningError(
          'join(): the pool is still running. Call close() (finish the calls made, then stop) or terminate() (stop now) first.',
        ),
      );
    }
    return this.#joined;
  }

  /**
   * `await using pool = new Pool(...)`: close() and join(): the calls made finish, then the
   * workers exit (CPython's `with` calls terminate(), which loses work started in it).
   */
  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
    await this.join();
  }

  /**
   * What the pool has done: tasks done, failed, queued and at workers; worker restarts; run
   * and wait percentiles of the last 1,000 chunks; each worker's busy share (NOTE [Pool
   * stats]). A plain object made from counters: cheap enough for a hot loop.
   */
  stats(): PoolStats {
    // A cluster pool's: every host's counts, this host's workers (NOTE [Same-host slots]).
    if (this.#remote !== null) return this.#remoteNow?.stats() ?? emptyStats();
    return this.#scheduler.stats();
  }

  /** The pids (threadIds for threads) of the workers now running. */
  pids(): number[] {
    if (this.#remote !== null) return this.#remoteNow?.pids() ?? [];
    return this.#scheduler.pids();
  }
}

/** imap() of a cluster pool: the pool is loaded on the first next(). */
async function* remoteIter(
  remote: Promise<RemotePool>,
  target: Target,
  iterable: Iterable<unknown> | AsyncIterable<unknown>,
  o: RemoteImapOptions,
): AsyncIterableIterator<unknown> {
  yield* (await remote).imap(target, iterable, o);
}

function checkCallOptions(options: CallOptions): void {
  if (options === null || typeof options !== 'object') throw new InvalidArgumentError('The options of a pool call must be an object.');
  const { signal } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidArgumentError(`options.signal must be an AbortSignal (got ${typeOf(signal)}).`);
  }
}

function checkCount(n: unknown, name: string): void {
  if (!Number.isInteger(n) || (n as number) < 1) throw new InvalidArgumentError(`${name} must be a positive integer (got ${String(n)}).`);
}

function isIterable(x: unknown): x is Iterable<unknown> {
  return x !== null && x !== undefined && typeof (x as Iterable<unknown>)[Symbol.iterator] === 'function';
}

function isAsyncIterable(x: unknown): x is AsyncIterable<unknown> {
  return x !== null && x !== undefined && typeof (x as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function';
}

function typeOf(x: unknown): string {
  return x === null ? 'null' : Array.isArray(x) ? 'an array' : typeof x;
}
