// The Pool's door to `tensorproc/cluster` (NOTE [Cluster pool]): `new Pool({ cluster })` hands
// every call to a cluster pool made by that entry, loaded (workers/cluster-entry.ts) when the
// option is given and never otherwise, so that the core imports no NATS client.
import { loadClusterEntry, type ClusterOptions } from '../workers/cluster-entry.js';
import type { Target } from '../process/target.js';
import type { PoolStats } from './pool-stats.js';

export type { ClusterOptions } from '../workers/cluster-entry.js';

/** A cluster imap's options: `ahead` is the call's buffersize (tasks read ahead of the consumer at most). */
export interface RemoteImapOptions {
  chunksize: number;
  ahead: number;
  ordered: boolean;
  signal?: AbortSignal;
}

/** What a cluster pool does for the Pool (src/cluster/pool-head.ts implements it). */
export interface RemotePool {
  map(target: Target, items: readonly unknown[], chunksize: number | undefined, star: boolean, signal?: AbortSignal): Promise<unknown[]>;
  apply(target: Target, args: readonly unknown[], signal?: AbortSignal): Promise<unknown>;
  /** Reads `items` lazily, at most `ahead` tasks ahead of the consumer; yields as chunks come back. */
  imap(target: Target, items: AsyncIterable<unknown> | Iterable<unknown>, o: RemoteImapOptions): AsyncIterableIterator<unknown>;
  close(): void;
  terminate(): void;
  join(): Promise<void>;
  /** The workers on the head's own host (NOTE [Same-host slots]); other hosts' are not known here. */
  pids(): number[];
  /** Counts over every host; worker entries and times for the head's own host's workers. */
  stats(): PoolStats;
}

/** pool.stats() of a pool with no worker yet (a cluster pool still placing its slots). */
export function emptyStats(): PoolStats {
  const none = { p50: 0, p90: 0, p99: 0, count: 0 };
  return { done: 0, failed: 0, queued: 0, inFlight: 0, restarts: 0, runTime: none, waitTime: none, workers: [] };
}

export interface RemotePoolOptions {
  processes: number;
  cluster: ClusterOptions;
  initializer: Target | null;
  initargs: readonly unknown[];
  maxtasksperchild: number | null;
}

interface ClusterModule {
  createRemotePool(options: RemotePoolOptions): RemotePool;
}

export function loadRemotePool(options: RemotePoolOptions): Promise<RemotePool> {
  return loadClusterEntry<ClusterModule>('new Pool({ cluster })').then((m) => m.createRemotePool(options));
}
