// The core's one door to `tensorproc/cluster` (NOTE [Cluster pool], NOTE [Cluster loader]):
// `new Pool({ cluster })` and `new DataLoader(target, { cluster })` both load that entry here,
// when the option is given and never otherwise, so that the core imports no NATS client and
// needs no server. Below the Pool and the DataLoader (one floor down), so both share it.
//
// The entry is found beside this module's own tree (dist/src/cluster/index.js under dist/src,
// dist/bundle/cluster/index.js inside the package bundle, whose import.meta.url mirrors
// dist/src: NOTE [The package bundle]): the one copy of the library that this process runs,
// never a second one through the package name.
import { ClusterUnavailableError } from '../errors.js';

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

/** Whether `c` looks like ClusterOptions (the rest is checked as the entry connects). */
export function isClusterOptions(c: unknown): c is ClusterOptions {
  return c !== null && typeof c === 'object' && (c as ClusterOptions).servers !== undefined;
}

/**
 * The cluster entry's exports, typed by the caller. `who` names the option in the error when
 * the entry or its NATS client cannot be loaded ("new Pool({ cluster })").
 */
export function loadClusterEntry<M>(who: string): Promise<M> {
  const url = new URL('../cluster/index.js', import.meta.url).href;
  return (import(url) as Promise<M>).catch((e: unknown) => {
    throw new ClusterUnavailableError(
      `${who} needs tensorproc/cluster and its NATS client: npm install @nats-io/transport-node @nats-io/jetstream (${(e as Error).message})`,
      { cause: e },
    );
  });
}
