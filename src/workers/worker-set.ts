// A set of N workers, each running a library "worker main", each with an inbox of its own:
// the piece under both the Pool (src/pool) and the DataLoader (src/data).
//
// NOTE [Worker set]
// Parent side (this file), for the set's user (the Pool, the DataLoader):
//  - `new WorkerSet({ main, size, startMethod, args, onMessage, onExit })` starts workers
//    0..size-1 at once, in parallel (each through startProcesses({ nprocs: 1, join: false })).
//    `main` is a target whose export was made with workerMain() (workers/worker-port.ts); it is
//    called as main({ id, port, args }) with `args(id)`, asked again at every start of that
//    id (a replacement included), so that start arguments (seeds, init targets, channels)
//    may be per worker.
//  - Each worker has its own SOCK_SEQPACKET socketpair, used both ways: `send(id, value)`
//    puts a message in that worker's inbox (so the user assigns work to a chosen worker
//    and always knows what each holds), and what the worker sends comes back through
//    `onMessage(id, message)`, in the order it was sent. One channel per worker rather than
//    one shared results channel: the messages of a worker are then known to be complete
//    when it has exited (everything it sent is in the socket by then, and is read before
//    its exit is reported), no message needs a worker id, a dead worker cannot leave a
//    shared channel half-used, and the parent's cost is the same (one poll wake-up reads
//    every datagram waiting; with a few workers the extra polls cost nothing measurable).
//  - `onExit(id, exit)` reports the end of the worker that currently holds `id`, after
//    every message it sent was delivered: exit code, signal, and `error`, the exception
//    torch's spawn would raise for it (ProcessRaisedException with the worker's stack when
//    it threw, ProcessExitedException for a signal or a non-zero code, null for exit 0),
//    named by the worker id. The id then has no worker until `replace(id)`.
//  - `replace(id)` starts a new worker for `id` now (same id, new process); one still
//    running there is retired: asked to stop as below, in the background, and nothing of
//    it is reported any more. `kill(id, signal)` signals the current one (its exit is
//    reported as any other).
//  - `stop({ grace })`: each worker is asked to stop (its inbox is closed: its port gives
//    END after the messages sent before), given `grace` ms to exit, then SIGTERM, `grace`
//    ms more, then SIGKILL. `terminate({ grace })` starts at SIGTERM. Both resolve once
//    every worker the set ever started has exited, retired ones included.
//  - Lifetimes: workers die with the parent (NOTE [No orphans]) and never keep it alive
//    by themselves (daemon); `keepAlive(true)` makes the workers and their channels keep
//    the parent alive, for while the user waits on them (results outstanding), and
//    `keepAlive(false)` lets the parent exit once it is otherwise done. stop() and
//    terminate() keep it alive until they resolve.
// Worker side (workers/worker-port.ts): `workerMain(fn)` and the WorkerPort: `await port.next()`
// (END once asked to stop), `port.take()` (NOTHING when none is waiting, without waiting),
// `port.send(value)`. A worker that returns from `fn` exits 0 once its event loop is empty.
// Messages are transport frames (NOTE [Frames]): tensors travel as handles.
import { addon, systemError } from '../native/index.js';
import { PipeClosedError } from '../errors.js';
import { Endpoint, NOTHING, type Frame } from '../transport/index.js';
import { startProcesses, type ProcessContext, type StartMethod, type Target } from '../process/index.js';
import type { ChildHandle } from '../process/child-handle.js';
import { ChildEnd } from './worker-port.js';
import { Instance, closeStrays, exitOf, type WorkerExit } from './worker-instance.js';
export type { WorkerExit } from './worker-instance.js';

export interface WorkerSetOptions {
  /** The worker main: a module and an export made with workerMain(). */
  main: Target;
  size: number;
  /** 'spawn' (default, a process each) or 'thread'. */
  startMethod?: StartMethod;
  /** Start arguments of worker `id`, asked at each start of it. Anything a message may carry. */
  args?: (id: number) => readonly unknown[];
  onMessage(id: number, message: unknown): void;
  onExit(id: number, exit: WorkerExit): void;
}

export interface StopOptions {
  /** Milliseconds for each step of the escalation (ask, SIGTERM, SIGKILL). Default 1000. */
  grace?: number;
}

const DEFAULT_GRACE_MS = 1000;

export class WorkerSet {
  readonly size: number;
  readonly startMethod: StartMethod;
  readonly #main: Target;
  readonly #args: (id: number) => readonly unknown[];
  readonly #onMessage: (id: number, message: unknown) => void;
  readonly #onExit: (id: number, exit: WorkerExit) => void;
  /** The worker holding each id (null after its exit was reported, until replace()). */
  readonly #current: (Instance | null)[];
  /** Every instance not yet exited, retired ones included. */
  readonly #live = new Set<Instance>();
  #keepAlive = false;
  /** While stop()/terminate() run: everything alive keeps the process alive. */
  #stopping = 0;

  constructor(options: WorkerSetOptions) {
    const { size, startMethod = 'spawn' } = options;
    this.size = size;
    this.startMethod = startMethod;
    this.#main = options.main;
    this.#args = options.args ?? (() => []);
    this.#onMessage = options.onMessage;
    this.#onExit = options.onExit;
    this.#current = new Array<Instance | null>(size).fill(null);
    try {
      for (let id = 0; id < size; id++) this.#current[id] = this.#start(id);
    } catch (e) {
      for (const inst of this.#live) this.#retire(inst, 'SIGKILL', 0);
      throw e;
    }
  }

  /** The pid (threadId) of worker `id`, null while it is starting or after its exit. */
  pid(id: number): number | null {
    const inst = this.#current[id];
    return inst?.child && !inst.exited ? inst.child.pid : null;
  }

  /** Whether worker `id` has a worker that has not exited (it may still be starting). */
  isAlive(id: number): boolean {
    const inst = this.#current[id];
    return inst !== null && inst !== undefined && !inst.exited;
  }

  /**
   * Puts `value` in worker `id`'s inbox. False when that worker is gone (its exit is
   * reported, or will be); a value that cannot travel throws, and nothing is sent.
   */
  send(id: number, value: unknown): boolean {
    const inst = this.#current[id];
    if (!inst || inst.exited) return false;
    return this.#sendFrame(inst, inst.endpoint.encode(value));
  }

  /** send() of a frame already encoded (encodeMessage): taken (sent, kept or abandoned) whatever happens. */
  sendFrame(id: number, frame: Frame): boolean {
    const inst = this.#current[id];
    if (!inst || inst.exited) {
      frame.abandon();
      return false;
    }
    return this.#sendFrame(inst, frame);
  }

  #sendFrame(inst: Instance, frame: Frame): boolean {
    try {
      inst.endpoint.sendEncoded(frame);
      return true;
    } catch (e) {
      if (e instanceof PipeClosedError) return false; // it died: its exit comes next
      throw e;
    }
  }

  /** Sends `signal` (default SIGTERM) to worker `id`; its exit is reported as any other. */
  kill(id: number, signal: NodeJS.Signals = 'SIGTERM'): void {
    this.#current[id]?.signal(signal);
  }

  /** Starts a new worker for `id` now; one still running there is retired (asked to stop, in the background). */
  replace(id: number, options: StopOptions = {}): void {
    const old = this.#current[id];
    this.#current[id] = null;
    if (old && !old.exited) this.#retire(old, 'ask', grace(options));
    this.#current[id] = this.#start(id);
  }

  /** Whether the workers and their channels keep this process alive (see NOTE [Worker set]). */
  keepAlive(on: boolean): void {
    if (this.#keepAlive === on) return;
    this.#keepAlive = on;
    for (const inst of this.#current) if (inst && !inst.exited) this.#watch(inst);
  }

  /** Asks every worker to stop, then SIGTERM, then SIGKILL (NOTE [Worker set]); resolves once all have exited. */
  stop(options: StopOptions = {}): Promise<void> {
    return this.#stopAll('ask', grace(options));
  }

  /** stop(), starting at SIGTERM. */
  terminate(options: StopOptions = {}): Promise<void> {
    return this.#stopAll('SIGTERM', grace(options));
  }

  async #stopAll(from: Step, ms: number): Promise<void> {
    this.#stopping++;
    try {
      for (let id = 0; id < this.size; id++) {
        const inst = this.#current[id];
        this.#current[id] = null;
        if (inst && !inst.exited) this.#retire(inst, from, ms);
      }
      for (const inst of this.#live) inst.setRef(true);
      await Promise.all([...this.#live].map((inst) => inst.done));
    } finally {
      this.#stopping--;
    }
  }

  #start(id: number): Instance {
    let fds: [number, number];
    try {
      fds = addon.socketpair();
    } catch (e) {
      throw systemError(e, 'creating a worker channel');
    }
    let endpoint: Endpoint;
    try {
      endpoint = new Endpoint(fds[0], fds[0], { what: 'worker channel' });
    } catch (e) {
      addon.close(fds[0]);
      addon.close(fds[1]);
      throw e;
    }
    let ctx: ProcessContext;
    let childInode = 0;
    try {
      if (this.startMethod === 'thread') childInode = addon.fstat(fds[1])[2];
      // The start arguments are encoded (the child end duplicated) before this returns.
      ctx = startProcesses(this.#main, {
        args: [new ChildEnd(fds[1]), id, this.#args(id)],
        nprocs: 1,
        join: false,
        daemon: true,
        startMethod: this.startMethod,
      });
    } catch (e) {
      endpoint.close();
      throw e;
    } finally {
      addon.close(fds[1]);
    }
    const inst = new Instance(id, endpoint, ctx, (i) => this.#drain(i), childInode);
    this.#live.add(inst);
    inst.done = ctx.started
      .then(
        () => {
          const child = ctx.processes[0] as ChildHandle;
          inst.child = child;
          if (inst.pendingSignal) child.kill(inst.pendingSignal);
          inst.setRef(this.#keepAlive || this.#stopping > 0);
          return child.exited;
        },
        (e: unknown) => {
          inst.startError = e instanceof Error ? e : new Error(String(e));
        },
      )
      .then(async () => {
        this.#exited(inst);
        // A thread ended by worker.terminate() (SIGKILL, or a stop it could not take) ran no
        // exit handler: its end of the channel is still open in this process, which shares
        // descriptors with it. Once spawn has closed its own copies (in the promise jobs that
        // follow the exit), nothing else can hold that socket.
        if (inst.childInode !== 0) {
          await new Promise((resolve) => setImmediate(resolve));
          closeStrays(inst.childInode);
        }
      });
    this.#watch(inst);
    return inst;
  }

  /** Reads the channel from the event loop while the set keeps the process alive. */
  #watch(inst: Instance): void {
    if (inst.ended || inst.endpoint.closed) return;
    // A worker retired by a signal is read until it exits (see #retire).
    const on = inst.retired || this.#keepAlive;
    inst.endpoint.recvWatcher.onReadable(on ? inst.onReadable : null);
    inst.setRef(on || this.#stopping > 0);
    // Polls are level-triggered: what arrived while nobody watched is read on the next turn.
  }

  /** Delivers every message waiting on `inst`'s channel (a retired worker's are dropped). */
  #drain(inst: Instance): void {
    // A retired worker's messages are dropped, and none is read once its channel is closed
    // (by a replace() that a message delivered here led to, say).
    while (!inst.ended && !inst.endpoint.closed) {
      let m: unknown;
      try {
        m = inst.endpoint.receiveNow();
      } catch (e) {
        if (!(e instanceof PipeClosedError)) {
          // A message that does not decode: the worker is not speaking the protocol.
          process.emitWarning(
            `tensorproc: worker ${inst.id} sent a message that cannot be read (${(e as Error).message}); it is stopped.`,
            'TensorprocWarning',
          );
          inst.signal('SIGKILL');
        }
        inst.ended = true;
        inst.endpoint.recvWatcher.onReadable(null);
        return;
      }
      if (m === NOTHING) return;
      if (!inst.retired) this.#onMessage(inst.id, m);
    }
  }

  #exited(inst: Instance): void {
    this.#drain(inst); // everything it sent is in the socket by now
    inst.exited = true;
    // Its escalation's timer goes with it: it would keep all this (and the set's start
    // arguments, tensors among them) reachable for its grace period.
    if (inst.timer !== null) clearTimeout(inst.timer);
    this.#live.delete(inst);
    inst.endpoint.dropBacklog(); // nothing will read it
    inst.endpoint.close();

    if (inst.retired || this.#current[inst.id] !== inst) return;
    this.#current[inst.id] = null;
    this.#onExit(inst.id, exitOf(inst));
  }

  /** Detaches `inst` from its id and stops it: `from` the first step of the escalation. */
  #retire(inst: Instance, from: Step, ms: number): void {
    inst.retired = true;
    inst.endpoint.dropBacklog(); // nothing more for it
    if (from === 'ask') {
      // The ask: a closed inbox (the worker's port gives END after what was sent before).
      inst.endpoint.recvWatcher.onReadable(null);
      inst.endpoint.close();
    } else {
      // Signalled, it may still send what it has (a pool worker's last results): that is read
      // and dropped until it exits, so that the tensors in it are let go of here, not lost
      // in the socket with their references counted for good.
      this.#watch(inst);
    }
    // A thread that does not heed its SIGTERM is terminated by ThreadChild itself (NOTE
    // [Stopping a thread child]); terminating it from here as well, while it runs its exit
    // handlers, would cut them short.
    const last: NodeJS.Signals[] = this.startMethod === 'thread' ? [] : ['SIGKILL'];
    if (from !== 'ask') inst.signal(from);
    inst.escalate(from === 'ask' ? ['SIGTERM', ...last] : from === 'SIGTERM' ? last : [], ms);
  }
}

type Step = 'ask' | 'SIGTERM' | 'SIGKILL';

function grace(options: StopOptions): number {
  const g = options.grace ?? DEFAULT_GRACE_MS;
  return Number.isFinite(g) && g >= 0 ? Math.min(g, 0x7fffffff) : DEFAULT_GRACE_MS;
}
