// The Pool's door to `tensorproc/cluster` (NOTE [Cluster pool]): `new Pool({ cluster })` hands
// every call to a cluster pool made by that entry, loaded here when the option is given and
// never otherwise, so that the core imports no NATS client and needs no server.
//
// The entry is found beside this module's own tree (dist/src/cluster/index.js under dist/src,
// dist/bundle/cluster/index.js inside the package bundle, whose import.meta.url mirrors
// dist/src: NOTE [The package bundle]): the one copy of the library that this process runs,
// never a second one through the package name.
import { ClusterUnavailableError } from '../errors.js';
import type { Target } from '../process/target.js';
import type { PoolStats } from './pool-stats.js';

/** `cluster` of PoolOptions and DataLoaderOptions (docs/cluster.md). */
export interface ClusterOptions {
  /** The NATS server(s): a URL or a list of URLs (nats://host:4222). */
  servers: string | readonly string[];
  /** Where the targets' modules are (default process.cwd()): agents resolve them under their --root. */
  root?: string;
  /** Credentials, when the servers ask for them. */
  user?: string;
  pass?: string;
  token?: string;
  /** A file holding an nkey seed (SU...), for servers configured with nkeys. */
  nkeyFile?: string;
  /** TLS to the servers: true, or the files of a private CA and a client certificate. */
  tls?: boolean | { ca?: string; cert?: string; key?: string };
  /** This host's id (default TENSORPROC_HOST_ID, then os.hostname()): the agent of the same id is used first. */
  hostId?: string;
  /** A host whose agent is silent this long (ms) is lost (default 3000). */
  hostTimeout?: number;
  /** How long to wait for agents to offer enough slots (ms, default 10000). */
  connectTimeout?: number;
}

/** What a cluster pool does for the Pool (src/cluster/pool-head.ts implements it). */
export interface RemotePool {
  map(target: Target, items: readonly unknown[], chunksize: number | undefined, star: boolean, signal?: AbortSignal): Promise<unknown[]>;
  apply(target: Target, args: readonly unknown[], signal?: AbortSignal): Promise<unknown>;
  imap(
    target: Target,
    items: AsyncIterable<unknown> | Iterable<unknown>,
    chunksize: number,
    ordered: boolean,
  ): AsyncIterableIterator<unknown>;
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
  const url = new URL('../cluster/index.js', import.meta.url).href;
  return (import(url) as Promise<ClusterModule>).then(
    (m) => m.createRemotePool(options),
    (e: unknown) => {
      throw new ClusterUnavailableError(
        `new Pool({ cluster }) needs tensorproc/cluster and its NATS client: npm install @nats-io/transport-node @nats-io/jetstream (${(e as Error).message})`,
        { cause: e },
      );
    },
  );
}
