// A cluster loader's workers on an agent's host (NOTE [Cluster loader]): the same worker set
// and worker program as a local DataLoader's (mp.LoaderWorkerHost), started with the head's
// spec resolved under this agent's root; what they say and how they end goes to the head.
import * as mp from '../index.js';
import type { WorkerArgs } from '../data/messages.js';
import { errorToData } from './codec.js';
import { specHere, type WireSpec } from './loader-wire.js';
import type { ToAgent, ToHead } from './protocol.js';

type Op<K extends ToAgent['op']> = Extract<ToAgent, { op: K }>;

const GRACE_MS = 1000;

export class AgentLoader {
  readonly #host: string;
  readonly #root: string;
  readonly #reply: (m: ToHead) => void;
  #workers: mp.LoaderWorkerHost | null = null;
  /** The loader's worker id of each of this host's workers. */
  #ids: number[] = [];
  #args: WorkerArgs[] = [];

  constructor(host: string, root: string, reply: (m: ToHead) => void) {
    this.#host = host;
    this.#root = root;
    this.#reply = reply;
  }

  /** `lstart`, `lreplace`, `lsend`; a failure goes back to the head, which ends the iteration with it. */
  take(m: Op<'lstart'> | Op<'lreplace'> | Op<'lsend'>): void {
    try {
      if (m.op === 'lstart') this.#start(m);
      else if (m.op === 'lreplace') {
        const i = this.#index(m.id);
        this.#args[i] = this.#local(m.args, m.id);
        this.#workers!.replace(i);
      } else this.#workers?.send(this.#index(m.id), m.value); // false: gone, its exit is reported
    } catch (e) {
      this.#reply({ op: 'lfailed', host: this.#host, error: errorToData(e) });
    }
  }

  #start(m: Op<'lstart'>): void {
    if (this.#workers !== null) throw new mp.InvalidArgumentError('This loader job has started its workers already.');
    this.#ids = m.ids;
    this.#args = m.args.map((a, i) => this.#local(a, m.ids[i]!));
    this.#workers = new mp.LoaderWorkerHost({
      size: m.ids.length,
      startMethod: m.startMethod,
      args: (i) => this.#args[i]!,
      onMessage: (i, value) => this.#forward(i, value),
      onExit: (i, exit) =>
        this.#reply({
          ...{ op: 'lexit', host: this.#host, id: this.#ids[i]!, pid: exit.pid },
          ...{ exitCode: exit.exitCode, signalName: exit.signalName, error: exit.error === null ? null : errorToData(exit.error) },
        }),
    });
    // The channels are read only while the set keeps this process alive (NOTE [Worker set]): an agent always waits on them.
    this.#workers.keepAlive(true);
  }

  /** A worker's message to the head; a batch's tensors are copied into the message, then released here (back to the worker's cache). */
  #forward(i: number, value: unknown): void {
    try {
      this.#reply({ op: 'lmsg', host: this.#host, id: this.#ids[i]!, pid: this.#workers?.pid(i) ?? -1, value });
    } finally {
      const v = value as { kind?: string; data?: unknown };
      if (v.kind === 'batch') mp.releaseTensors(v.data);
    }
  }

  #index(id: number): number {
    const i = this.#ids.indexOf(id);
    if (i < 0 || this.#workers === null) throw new mp.InvalidArgumentError(`This loader job has no worker ${id} on this host.`);
    return i;
  }

  #local(args: readonly unknown[], id: number): WorkerArgs {
    const [spec, replica] = args as [WireSpec, WorkerArgs[1]];
    return [specHere(this.#root, spec), replica, id, this.#host];
  }

  /** Stops the workers (`terminate`: from SIGTERM) and waits for their exit. */
  async end(terminate: boolean): Promise<void> {
    const w = this.#workers;
    if (w === null) return;
    await (terminate ? w.terminate({ grace: GRACE_MS }) : w.stop({ grace: GRACE_MS }));
  }
}
