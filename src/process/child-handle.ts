// The parent's view of one child, process or thread: what ProcessContext needs to join and
// stop it, and what `ctx.processes` shows (torch's multiprocessing.Process: pid, exitcode,
// is_alive(), terminate(), kill()).
import { constants } from 'node:os';
import type { ErrorMessage, StartMethod } from './messages.js';
import { settledWithin } from './settled-within.js';

export interface SpawnedProcess {
  /** The index the child got as its first argument. */
  readonly index: number;
  /** The OS pid of a process child; the threadId of a thread child (all threads share process.pid). */
  readonly pid: number;
  readonly startMethod: StartMethod;
  /** null while running; the exit code once exited; minus the signal number when a signal ended it (torch's convention). */
  readonly exitCode: number | null;
  /** The signal that ended the child, or null. For a thread, the signal asked of kill(), which terminate() stood in for. */
  readonly signalName: NodeJS.Signals | null;
  /** Resolves when the child has exited (never rejects). */
  readonly exited: Promise<void>;
  isAlive(): boolean;
  /** Sends a signal (default SIGTERM). A thread cannot take signals: it is stopped instead (NOTE [Stopping a thread child]). */
  kill(signal?: NodeJS.Signals): void;
  /** kill('SIGTERM'). */
  terminate(): void;
}

// The children of this thread still running, so that a thread child that is stopped stops
// its own children first (NOTE [Stopping a thread child]).
const running = new Set<ChildHandle>();

/**
 * Sends SIGTERM to every child of this thread still running and resolves once they have all
 * exited, or after `ms`.
 */
export async function stopRunningChildren(ms: number): Promise<void> {
  if (running.size === 0) return;
  const children = [...running];
  for (const c of children) c.kill('SIGTERM');
  await settledWithin(Promise.all(children.map((c) => c.exited)), ms);
}

/** The shared part of ProcessChild and ThreadChild: exit bookkeeping. */
export abstract class ChildHandle implements SpawnedProcess {
  abstract readonly pid: number;
  abstract readonly startMethod: StartMethod;
  exitCode: number | null = null;
  signalName: NodeJS.Signals | null = null;
  /** The child's ErrorMessage, if it sent one before exiting. */
  error: ErrorMessage | null = null;
  readonly exited: Promise<void>;
  #resolveExited!: () => void;
  readonly #onExit: (child: ChildHandle) => void;

  constructor(
    readonly index: number,
    onExit: (child: ChildHandle) => void,
  ) {
    this.#onExit = onExit;
    this.exited = new Promise((resolve) => (this.#resolveExited = resolve));
  }

  /** @internal Counts the child among this thread's running ones (stopRunningChildren), once it is fully made. */
  markRunning(): void {
    if (this.exitCode === null) running.add(this);
  }

  isAlive(): boolean {
    return this.exitCode === null;
  }

  terminate(): void {
    this.kill('SIGTERM');
  }

  abstract kill(signal?: NodeJS.Signals): void;
  /** Keeps (true) or stops keeping (false) the parent's event loop alive while the child runs. */
  abstract setRef(ref: boolean): void;

  protected finish(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.exitCode !== null) return;
    running.delete(this);
    this.signalName = signal;
    this.exitCode = signal ? -(constants.signals[signal] ?? 0) : (code ?? 0);
    this.#resolveExited();
    this.#onExit(this);
  }
}
