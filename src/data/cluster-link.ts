// The DataLoader's door to `tensorproc/cluster` (NOTE [Cluster loader]): with the `cluster`
// option, each epoch's workers are placed on the agents' slots by that entry, loaded
// (workers/cluster-entry.ts) only then, so that the core imports no NATS client.
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadClusterEntry, type ClusterOptions } from '../workers/cluster-entry.js';
import type { FunctionTarget } from './target.js';
import type { WorkerSpec } from './messages.js';
import type { LoaderSet, LoaderSetOptions } from './worker-host.js';

/** A loader's workers placed on a cluster's slots, not started yet (src/cluster/loader-head.ts). */
export interface RemoteLoader {
  /** Starts the workers; `fail` ends the iteration (a host lost). */
  bind(o: LoaderSetOptions, fail: (e: Error) => void): LoaderSet;
  /** Gives the slots back without starting anything. */
  stop(): Promise<void>;
}

export interface RemoteLoaderOptions {
  numWorkers: number;
  cluster: ClusterOptions;
  /** Checked before anything connects: its targets must resolve under cluster.root. */
  spec: WorkerSpec;
}

interface ClusterModule {
  placeLoaderWorkers(o: RemoteLoaderOptions): Promise<RemoteLoader>;
}

export function placeRemoteWorkers(o: RemoteLoaderOptions): Promise<RemoteLoader> {
  return loadClusterEntry<ClusterModule>('new DataLoader(dataset, { cluster })').then((m) => m.placeLoaderWorkers(o));
}

/** A target named by a path relative to cluster.root ('data.js', './lib/data.js'), as the cluster Pool takes them, as a file: URL. */
export function underRoot<T extends FunctionTarget>(t: T, cluster: ClusterOptions): T {
  const m = t.module;
  if (typeof m !== 'string' || m.startsWith('file:') || isAbsolute(m) || !(m.startsWith('.') || /\.[cm]?js$/.test(m))) return t;
  return { ...t, module: pathToFileURL(resolve(cluster.root ?? process.cwd(), m)) };
}
