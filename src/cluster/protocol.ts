// The subjects and messages between a cluster Pool's head and the agents (NOTE [Cluster pool]).
//
// NOTE [Cluster pool]
// `new Pool({ cluster })` (pool/cluster-link.ts) hands its calls to a head (cluster/pool-head.ts)
// that places the pool's `processes` on agents (cluster/agent-main.ts, one per host, `npx
// tensorproc agent`). Each agent runs, for each pool that took slots of it, a local Pool of
// that many workers: the same worker set, worker main and exit reporting as any local Pool,
// so a worker killed there rejects exactly the chunk it held with ProcessExitedException
// (its exit code and signal as the local Pool saw them), and its slot gets a new process.
// The head does what CPython's Pool does with its task queue, across hosts: chunks (`chunksize`
// items), each sent to one host with room (local host first), results put back in order.
// imap and imapUnordered read their input lazily, at most `buffersize` tasks ahead of the
// consumer, each chunk a call of its own, and yield as chunks come back (pool-stream.ts).
// Liveness runs both ways on core NATS heartbeats, never on the connection alone (a server
// may keep a dead client's connection for a while):
//  - the head publishes tp.hb.head.<job> every HEARTBEAT_MS; an agent that hears none for
//    the lease the head gave at open terminates that pool's workers (the head died: no
//    orphans on any host, within lease + the pool's SIGTERM/SIGKILL escalation);
//  - each agent publishes tp.hb.agent.<host>; a head that hears none for hostTimeout treats
//    the host as lost: the chunks it held reject with HostLostError, later ones go elsewhere.
//    An agent that dies takes its workers with it (children die with their parent).
// A chunk is sent once and never re-sent: a Pool task runs at most once (rejected, never
// silently re-run), as CPython's contract says.
// An aborted call (its caller's signal) rejects at once on the head, which sends 'cancel' for
// each of its chunks a host holds; the agent aborts that chunk's call on its local Pool, which
// drops it if no worker has begun it and stops a worker that has (NOTE [Pool aborts]). An imap
// left early cancels nothing there: its chunks run, their results dropped.
// The slots of an agent on the head's own machine are the exception to all the wire above:
// the head runs their workers itself, and NATS carries only their lease (NOTE [Same-host
// slots] in cluster/pool-local.ts).
import { readFileSync } from 'node:fs';

export const HEARTBEAT_MS = 500;
export const DEFAULT_HOST_TIMEOUT_MS = 3000;

export const DISCOVER = 'tp.discover';
export const openSubject = (host: string): string => `tp.agent.${host}.open`;
export const jobSubject = (host: string, job: string): string => `tp.agent.${host}.job.${job}`;
export const headSubject = (job: string): string => `tp.head.${job}`;
export const headBeat = (job: string): string => `tp.hb.head.${job}`;
export const agentBeat = (host: string): string => `tp.hb.agent.${host}`;

/** A target as it travels: a path under the code root ('lib/x.js'), or a package specifier. */
export interface WireTarget {
  path: string | null;
  specifier: string | null;
  export: string;
}

export interface Offer {
  host: string;
  slots: number;
  free: number;
  /** The kernel's boot id (/proc/sys/kernel/random/boot_id; '' where unreadable): with `host`, how a head knows the agent is on its own machine. */
  boot?: string;
  /** The agent takes 'cancel' (an agent before it ended the job on an op it did not know). */
  cancel?: boolean;
}

export interface OpenRequest {
  job: string;
  slots: number;
  leaseMs: number;
  initializer: WireTarget | null;
  initargs: readonly unknown[];
  maxtasksperchild: number | null;
  /**
   * The head runs these slots' workers itself, on this agent's machine (NOTE [Same-host
   * slots]): the agent only holds them for the head's lease. Absent: the agent runs them.
   */
  local?: boolean;
  /** DataLoader workers (NOTE [Cluster loader]): the agent starts them on `lstart`. Absent: a Pool's. */
  loader?: boolean;
}

/** head → agent, on jobSubject. */
export type ToAgent =
  // abortable: its call has a signal; the agent's local Pool call then has one too (NOTE [Pool
  // aborts]: such chunks keep a worker to themselves), for 'cancel'. Absent from older heads.
  | { op: 'run'; seq: number; target: WireTarget; items: readonly unknown[]; star: boolean; abortable?: boolean }
  // The call of chunk `seq` was aborted: dropped here if no worker has begun it (a local Pool's abort).
  | { op: 'cancel'; seq: number }
  | { op: 'close' }
  | { op: 'terminate' }
  // A cluster loader's (NOTE [Cluster loader]): its workers here, by the loader's worker id.
  | { op: 'lstart'; ids: number[]; args: unknown[][]; startMethod: 'spawn' | 'thread' }
  | { op: 'lreplace'; id: number; args: unknown[] }
  | { op: 'lsend'; id: number; value: unknown };

/** agent → head, on headSubject. */
export type ToHead =
  | { op: 'done'; host: string; seq: number; values: unknown[] }
  | { op: 'failed'; host: string; seq: number; error: Record<string, unknown> }
  | { op: 'closed'; host: string }
  // A cluster loader's worker said `value`, or ended; or the agent could not do what it was asked.
  | { op: 'lmsg'; host: string; id: number; pid: number; value: unknown }
  | {
      op: 'lexit';
      host: string;
      id: number;
      pid: number;
      exitCode: number;
      signalName: NodeJS.Signals | null;
      error: Record<string, unknown> | null;
    }
  | { op: 'lfailed'; host: string; error: Record<string, unknown> };

let boot: string | null = null;
/** This machine's boot id, the same in every process and namespace of one running kernel ('' where unreadable). */
export function bootId(): string {
  if (boot === null) {
    try {
      boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    } catch {
      boot = '';
    }
  }
  return boot;
}
