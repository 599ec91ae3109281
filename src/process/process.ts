// mp.Process: Python's multiprocessing.Process (torch.multiprocessing re-exports it), over
// the same children as startProcesses(): a process or a thread, started at once, that
// imports and checks its target itself (NOTE [Loading the target in the child]), dies with
// its parent (NOTE [No orphans]) and starts with its parent's sharing strategy. The
// function is called as fn(...args), with no index.
//
// A child that throws exits with code 1 and its error is printed on this process's stderr
// under "Process <name>:", as Python prints the child's traceback; `error` holds it too,
// rebuilt (name, message, stack, fields, cause), or the coded error of a target the child
// could not load.
import { InvalidArgumentError, ProcessStateError } from '../errors.js';
import { encodeArgs } from './args-encode.js';
import { checkNotLoading } from './bootstrap.js';
import type { ChildHandle } from './child-handle.js';
import { startChildren } from './child-start.js';
import { nextIdentity } from './current.js';
import type { Identity, StartMethod } from './messages.js';
import { checkOptions, checkStartMethod, describe } from './options.js';
import { settledWithin } from './settled-within.js';
import { checkTarget, type Target } from './target.js';

export interface ProcessOptions {
  /** The function the child runs, by module and export (see Target). */
  target: Target;
  /** fn is called as fn(...args). Structured-clonable values and tensorproc objects. */
  args?: readonly unknown[];
  /** true: the child never keeps this process alive (it still dies with it). Default false. */
  daemon?: boolean;
  /** Default 'Process-N' (N counts the children this process started). */
  name?: string;
  /** 'spawn' (default): a fresh Node process. 'thread': a worker thread. */
  startMethod?: StartMethod;
}

const OPTIONS = ['target', 'args', 'daemon', 'name', 'startMethod'] as const;

export class Process {
  readonly startMethod: StartMethod;
  readonly #target: Target;
  readonly #args: readonly unknown[];
  #identity: Identity;
  #child: ChildHandle | null = null;
  /** The child's failure, made once it has exited (undefined until then). */
  #failure: Error | null | undefined = undefined;
  #closed = false;
  #joiners = 0;

  constructor(options: ProcessOptions) {
    if (options === undefined) throw new InvalidArgumentError('new Process() takes { target, args?, daemon?, name?, startMethod? }.');
    const o = checkOptions<ProcessOptions>(options, OPTIONS, 'new Process()');
    checkTarget(o.target); // its shape now; resolved at start(), where the child is told it
    const { args = [], daemon = false, name } = o;
    if (!Array.isArray(args)) throw new InvalidArgumentError(`args must be an array: fn is called as fn(...args) (got ${describe(args)}).`);
    if (name !== undefined) checkName(name);
    this.startMethod = checkStartMethod(o.startMethod);
    this.#target = o.target;
    this.#args = args;
    this.#identity = nextIdentity(daemon, name);
  }

  get name(): string {
    return this.#identity.name;
  }

  set name(name: string) {
    checkName(name);
    this.#identity = { ...this.#identity, name };
  }

  get daemon(): boolean {
    return this.#identity.daemon;
  }

  /** Settable until start(), as in Python. */
  set daemon(daemon: boolean) {
    if (typeof daemon !== 'boolean') throw new InvalidArgumentError(`daemon must be true or false (got ${describe(daemon)}).`);
    if (this.#child) throw new ProcessStateError(`The process ${this.name} has already started: set daemon before start().`);
    this.#identity = { ...this.#identity, daemon };
  }

  /** The OS pid (the threadId of a thread child); null before start(). */
  get pid(): number | null {
    return this.#started('read its pid')?.pid ?? null;
  }

  /** Python's ident: the pid. */
  get ident(): number | null {
    return this.pid;
  }

  /** null before start() and while running; the exit code after; minus the signal number when a signal ended it. */
  get exitCode(): number | null {
    return this.#started('read its exit code')?.exitCode ?? null;
  }

  /** The signal that ended the child, or null. */
  get signalName(): NodeJS.Signals | null {
    return this.#started('read its signal')?.signalName ?? null;
  }

  /** What the child failed with (it threw, could not load its target, or could not start), or null. */
  get error(): Error | null {
    this.#started('read its error');
    return this.#failure ?? null;
  }

  /** Starts the child. Its pid is known when this returns. */
  start(): void {
    this.#open('start it');
    if (this.#child) throw new ProcessStateError(`The process ${this.name} was started already: a process can be started once.`);
    checkNotLoading();
    const spec = checkTarget(this.#target);
    const encoded = encodeArgs(this.#args);
    const { daemon } = this;
    [this.#child] = startChildren(
      spec,
      encoded,
      { startMethod: this.startMethod, daemon },
      [{ index: null, identity: this.#identity }],
      (c) => this.#onExit(c),
    );
  }

  /** Waits until the child has exited, or `timeout` ms have passed (then it may still run: see isAlive()). */
  async join(timeout?: number | null): Promise<void> {
    this.#open('join it');
    const child = this.#child;
    if (!child) throw new ProcessStateError(`The process ${this.name} has not been started: only a started process can be joined.`);
    if (timeout !== undefined && timeout !== null && (typeof timeout !== 'number' || !(timeout >= 0))) {
      throw new InvalidArgumentError(
        `join(timeout): timeout must be a number of milliseconds >= 0, or null to wait without limit (got ${describe(timeout)}).`,
      );
    }
    if (!child.isAlive()) return;
    // While someone waits, a daemon child keeps the loop alive: an awaited join() must not
    // be cut short by this process exiting under it.
    if (this.daemon && this.#joiners++ === 0) child.setRef(true);
    try {
      if (timeout === undefined || timeout === null || timeout > 0x7fffffff) await child.exited;
      else await settledWithin(child.exited, timeout);
    } finally {
      if (this.daemon && --this.#joiners === 0 && child.isAlive()) child.setRef(false);
    }
  }

  /** false before start() and after the child exited. */
  isAlive(): boolean {
    return this.#started('ask whether it is alive')?.isAlive() ?? false;
  }

  /** SIGTERM (a thread child is asked to exit: NOTE [Stopping a thread child]). Nothing once it has exited. */
  terminate(): void {
    this.#running('terminate it').kill('SIGTERM');
  }

  /** SIGKILL. Nothing once it has exited. */
  kill(): void {
    this.#running('kill it').kill('SIGKILL');
  }

  /** Lets go of the process object; it must not be running. Most methods throw afterwards. */
  close(): void {
    if (this.#child?.isAlive()) {
      throw new ProcessStateError(`The process ${this.name} is still running: join() or terminate() it before close().`);
    }
    this.#closed = true;
  }

  #onExit(child: ChildHandle): void {
    const failure = (this.#failure = child.failure(null));
    if (!failure) return;
    // Python prints a failed child's traceback on stderr: so that a failure nobody asks
    // about is not lost (spawn() children report theirs through join() instead).
    const text = child.error && !child.error.load ? child.error.trace : failure.message;
    process.stderr.write(`Process ${this.name}:\n${text}\n`);
  }

  #open(what: string): void {
    if (this.#closed) throw new ProcessStateError(`The process ${this.name} is closed (close() was called): cannot ${what}.`);
  }

  #started(what: string): ChildHandle | null {
    this.#open(what);
    return this.#child;
  }

  #running(what: string): ChildHandle {
    this.#open(what);
    if (!this.#child) throw new ProcessStateError(`The process ${this.name} has not been started: cannot ${what}.`);
    return this.#child;
  }
}

function checkName(name: unknown): void {
  if (typeof name !== 'string') throw new InvalidArgumentError(`A process name must be a string (got ${describe(name)}).`);
}
