// The parent's view of one child, process or thread: what ProcessContext and Process need
// to join and stop it, and what `ctx.processes` shows (torch's multiprocessing.Process: pid,
// exitcode, is_alive(), terminate(), kill()).
import { constants } from 'node:os';
import { debug } from '../debug.js';
import { rebuildError, targetError } from './error-payload.js';
import type { ErrorMessage, StartMethod } from './messages.js';
import { settledWithin } from './settled-within.js';

export interface SpawnedProcess {
  /** The index the child got as its first argument. */
  readonly index: number;
  /** Its name, as currentProcess().name shows it in the child ('Process-1'). */
  readonly name: string;
  /** The OS pid of a process child; the threadId of a thread child (all threads share process.pid). */
  readonly pid: number;
  readonly startMethod: StartMethod;
  /** null while running; the exit code once exited; minus the signal number when a signal ended it (torch's convention). */
  readonly exitCode: number | null;
  /** The signal that ended the child, or null. For a thread, the signal asked of kill(), which terminate() stood in for. */
  readonly signalName: NodeJS.Signals | null;
  /** Resolves when the child has exited (never rejects). */
  readonly exited: Promise<void>;
  /**
   * Resolves once the child runs (a process has been started, a thread runs JavaScript), or
   * has exited before; rejects with the coded error of a child that could not be started.
   */
  readonly started: Promise<void>;
  /**
   * Resolves once the child has decoded its arguments and loaded its target, just before it
   * calls it, or once it exited before that; rejects with the coded error of a child that
   * could not load its target (NOTE [Loading the target in the child]) or be started.
   */
  readonly loaded: Promise<void>;
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

/**
 * The shared part of ProcessChild and ThreadChild: exit bookkeeping. A ProcessContext's
 * children have an index; a Process's child has none (it calls fn(...args)).
 */
export abstract class ChildHandle implements Omit<SpawnedProcess, 'index'> {
  abstract readonly pid: number;
  abstract readonly startMethod: StartMethod;
  exitCode: number | null = null;
  signalName: NodeJS.Signals | null = null;
  /** The child's ErrorMessage, if it sent one before exiting. */
  error: ErrorMessage | null = null;
  /** Why a process child could not be started at all (it then exits with 127, as a shell reports it). */
  startError: Error | null = null;
  readonly exited: Promise<void>;
  readonly started: Promise<void>;
  readonly loaded: Promise<void>;
  #resolveExited!: () => void;
  #settleStarted!: (error: Error | null) => void;
  #settleLoaded!: (error: Error | null) => void;
  readonly #onExit: (child: ChildHandle) => void;

  constructor(
    readonly index: number | null,
    readonly name: string,
    onExit: (child: ChildHandle) => void,
  ) {
    this.#onExit = onExit;
    this.exited = new Promise((resolve) => (this.#resolveExited = resolve));
    [this.started, this.#settleStarted] = settleable();
    [this.loaded, this.#settleLoaded] = settleable();
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

  /**
   * What the child failed with, as an Error of this process: its start error, the coded
   * error of a target it could not load, or what it threw (rebuilt); null if none.
   * `index` is the child's index as its error should name it (null for a Process).
   */
  failure(index: number | null): Error | null {
    if (this.startError) return this.startError;
    if (!this.error) return null;
    return this.error.load ? targetError(this.error.error, index, this.pid) : rebuildError(this.error.error);
  }

  /** The child runs ('spawn' of a process, 'online' of a thread). */
  protected running(): void {
    debug('child %d started: pid %d (%s)', this.index, this.pid, this.startMethod);
    this.#settleStarted(null);
  }

  /** A child's word that it has loaded its target (LoadedMessage). */
  protected targetLoaded(): void {
    this.#settleStarted(null);
    this.#settleLoaded(null);
  }

  protected finish(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.exitCode !== null) return;
    running.delete(this);
    this.signalName = signal;
    this.exitCode = signal ? -(constants.signals[signal] ?? 0) : (code ?? 0);
    const raised = this.error ? ` after raising ${this.error.error.name}: ${this.error.error.message}` : '';
    if (signal) debug('child %d (pid %d) killed by %s', this.index, this.pid, signal);
    else debug('child %d (pid %d) exited with code %d%s', this.index, this.pid, this.exitCode, raised);
    // Settles what the child never said (a settled promise ignores this).
    this.#settleStarted(this.startError);
    this.#settleLoaded(this.startError ?? (this.error?.load ? this.failure(this.index) : null));
    this.#resolveExited();
    this.#onExit(this);
  }
}

/** A promise and the one call that settles it (an Error rejects); never an unhandled rejection. */
function settleable(): [Promise<void>, (error: Error | null) => void] {
  let settle!: (error: Error | null) => void;
  const p = new Promise<void>((resolve, reject) => {
    settle = (error) => (error ? reject(error) : resolve());
  });
  p.catch(() => {}); // join() reports the same error
  return [p, settle];
}
