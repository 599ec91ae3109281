// One worker a WorkerSet (workers/worker-set.ts) started, process or thread, and what the set reads
// of it once it has ended: its exit, and the stray descriptors a terminated thread leaves.
import { readdirSync, readlinkSync } from 'node:fs';
import { addon } from '../native/index.js';
import type { ProcessException } from '../errors.js';
import type { Endpoint } from '../transport/index.js';
import type { ProcessContext } from '../process/index.js';
import type { ChildHandle } from '../process/child-handle.js';
import { exceptionFor } from '../process/context.js';

/** One started worker process or thread. */
export class Instance {
  child: ChildHandle | null = null;
  startError: Error | null = null;
  /** A signal asked before the child was started, sent once it is. */
  pendingSignal: NodeJS.Signals | null = null;
  retired = false;
  /** The next step of its escalation, once retired. */
  timer: NodeJS.Timeout | null = null;
  exited = false;
  ended = false; // the channel's end of stream was read
  /** Settles once the worker has exited and its messages were delivered. */
  done!: Promise<void>;
  readonly onReadable: () => void;

  constructor(
    readonly id: number,
    readonly endpoint: Endpoint,
    readonly ctx: ProcessContext,
    drain: (inst: Instance) => void,
    /** A thread worker's end of the channel, by inode (0 for a process; see #exited). */
    readonly childInode: number,
  ) {
    this.onReadable = () => drain(this);
  }

  signal(sig: NodeJS.Signals): void {
    if (this.exited) return;
    if (this.child === null) this.pendingSignal = sig;
    else this.child.kill(sig);
  }

  setRef(ref: boolean): void {
    if (this.child !== null && !this.exited) this.child.setRef(ref);
  }

  /** Sends `steps` one after the other, `ms` apart (the first `ms` from now), until it has exited. */
  escalate(steps: NodeJS.Signals[], ms: number): void {
    const next = (): void => {
      this.timer = null;
      const sig = steps.shift();
      if (sig === undefined || this.exited) return;
      this.signal(sig);
      if (steps.length > 0) this.timer = setTimeout(next, ms).unref();
    };
    if (steps.length > 0) this.timer = setTimeout(next, ms).unref();
  }
}

/** How a worker ended (exitOf() makes it), as the worker set reports it. */
export interface WorkerExit {
  /** The worker's pid (threadId for a thread); -1 if it never started. */
  readonly pid: number;
  /** Its exit code; minus the signal number when a signal ended it (torch's convention). */
  readonly exitCode: number;
  readonly signalName: NodeJS.Signals | null;
  /** What torch's spawn would raise for this end (null for exit 0); the start's error if it could not start. */
  readonly error: ProcessException | Error | null;
}

/** Closes every descriptor of this process on the socket `inode`. */
export function closeStrays(inode: number): void {
  const target = `socket:[${inode}]`;
  for (const name of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${name}`) === target) addon.close(Number(name));
    } catch {
      // the descriptor readdir used, closed by now
    }
  }
}

export function exitOf(inst: Instance): WorkerExit {
  const child = inst.child;
  if (child === null) return { pid: -1, exitCode: 1, signalName: null, error: inst.startError };
  const exitCode = child.exitCode ?? 0;
  return {
    pid: child.pid,
    exitCode,
    signalName: child.signalName,
    error: exitCode === 0 && child.error === null ? null : exceptionFor(child, inst.id),
  };
}
