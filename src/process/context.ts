// ProcessContext: joins the children of one spawn()/startProcesses() call with torch's
// failure semantics (torch/multiprocessing/spawn.py, ProcessContext.join).
//
// Everything is event-driven: each child's exit wakes the waiters at once, so a failure is
// seen in the same turn of the event loop as the exit that caused it; timers exist only for
// `timeout` and the grace periods.
import { InvalidArgumentError, ProcessExitedException, ProcessRaisedException } from '../errors.js';
import type { ChildHandle, SpawnedProcess } from './child-handle.js';
import { describe } from './options.js';

export interface JoinOptions {
  /** Milliseconds to wait before giving up and returning false. Default: wait as long as it takes. */
  timeout?: number | null;
  /**
   * Milliseconds the other children get to exit on their own after one failed, before
   * SIGTERM; then as long again before SIGKILL. Default: SIGTERM at once, SIGKILL 30 s later.
   */
  gracePeriod?: number | null;
}

const DEFAULT_KILL_AFTER_MS = 30_000;

export class ProcessContext {
  readonly #children: ChildHandle[];
  readonly #waiters = new Set<() => void>();
  #failed: ChildHandle | null = null;
  #stopping: Promise<void> | null = null;
  #error: Error | null = null;
  #daemon: boolean;
  #started: Promise<void> | null = null;
  #loaded: Promise<void> | null = null;

  /** @internal Built by startProcesses(), which adds the children once started. */
  constructor(children: ChildHandle[], daemon: boolean) {
    this.#children = children;
    this.#daemon = daemon;
  }

  /**
   * Resolves once every child runs (they were all started before startProcesses()
   * returned, and pids() lists them); rejects with the coded error of a child that could
   * not be started (the OS reports some of those only later: EAGAIN, the process limit).
   */
  get started(): Promise<void> {
    return (this.#started ??= all(this.#children.map((c) => c.started)));
  }

  /**
   * Resolves once every child has loaded its target and is calling it (or has exited
   * first); rejects with the coded error of the first that could not load it (a
   * TargetNotFoundError, TargetNotFunctionError or TargetLoadError; join() throws it too).
   */
  get loaded(): Promise<void> {
    return (this.#loaded ??= all(this.#children.map((c) => c.loaded)));
  }

  /** The children, in index order. */
  get processes(): readonly SpawnedProcess[] {
    return this.#children as SpawnedProcess[]; // a context's children all have an index
  }

  /** OS pids of process children; threadIds of thread children. */
  pids(): number[] {
    return this.#children.map((c) => c.pid);
  }

  /** @internal Called by each child handle when it has exited. */
  onExit(child: ChildHandle): void {
    // The first failure in exit order is the one reported, as torch reports the first
    // sentinel found failed.
    if (child.exitCode !== 0 && this.#failed === null) this.#failed = child;
    for (const wake of this.#waiters) wake();
  }

  /**
   * Waits until every child exited with 0 (true), `timeout` passed (false), or one failed:
   * then the others are stopped (see JoinOptions.gracePeriod), nothing is left alive, and
   * the failure is thrown as ProcessRaisedException or ProcessExitedException, or as the
   * coded error of a child that could not load its target or be started. Calling it again
   * after it returned true returns true; after it threw, throws the same error. A number
   * is taken as the timeout, as torch's join(timeout) takes it.
   */
  async join(options: JoinOptions | number | null = {}): Promise<boolean> {
    const o = joinOptions(options);
    const timeout = checkMs(o.timeout, 'timeout');
    const gracePeriod = checkMs(o.gracePeriod, 'gracePeriod');
    const done = (): boolean => this.#failed !== null || this.#allExited();
    if (!done() && !(await this.#waitUntil(done, timeout))) return false;
    const failed = this.#failed;
    if (failed === null) return true;
    this.#stopping ??= this.#stopOthers(gracePeriod);
    await this.#stopping;
    this.#error ??= exceptionFor(failed);
    throw this.#error;
  }

  #allExited(): boolean {
    return this.#children.every((c) => !c.isAlive());
  }

  async #stopOthers(gracePeriod: number | null): Promise<void> {
    const alive = (): ChildHandle[] => this.#children.filter((c) => c.isAlive());
    // Infinity (any grace past setTimeout's limit): the others may take as long as they need.
    if (gracePeriod !== null) await this.#waitUntil(() => alive().length === 0, timerMs(gracePeriod));
    for (const c of alive()) {
      warn(`Terminating process ${c.pid} via signal SIGTERM`);
      c.kill('SIGTERM');
    }
    await this.#waitUntil(() => alive().length === 0, gracePeriod === null ? DEFAULT_KILL_AFTER_MS : timerMs(gracePeriod));
    for (const c of alive()) {
      warn(`Unable to shutdown process ${c.pid} via SIGTERM, forcefully exiting via SIGKILL`);
      c.kill('SIGKILL');
    }
    await this.#waitUntil(() => alive().length === 0, null);
  }

  /** Resolves true once `ready()` holds (checked at each exit), false after `ms` (null: never). */
  #waitUntil(ready: () => boolean, ms: number | null): Promise<boolean> {
    if (ready()) return Promise.resolve(true);
    // While someone waits, even daemon children keep the loop alive: an awaited join()
    // must not be cut short by the process exiting under it.
    if (this.#daemon) this.#setRef(true);
    return new Promise<boolean>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = (value: boolean): void => {
        this.#waiters.delete(wake);
        if (timer) clearTimeout(timer);
        if (this.#daemon && this.#waiters.size === 0) this.#setRef(false);
        resolve(value);
      };
      const wake = (): void => {
        if (ready()) settle(true);
      };
      this.#waiters.add(wake);
      if (ms !== null) timer = setTimeout(() => settle(ready()), ms);
    });
  }

  #setRef(ref: boolean): void {
    for (const c of this.#children) if (c.isAlive()) c.setRef(ref);
  }
}

/** Promise.all, for nothing but the wait: never an unhandled rejection (join() reports the same). */
function all(ps: Promise<void>[]): Promise<void> {
  const p = Promise.all(ps).then(() => {});
  p.catch(() => {});
  return p;
}

/** torch's name for ProcessContext (renamed in torch 1.4); the very same class here. */
export const SpawnContext = ProcessContext;
export type SpawnContext = ProcessContext;

/**
 * How `child` failed, as torch reports it (or the coded error of a child that could not
 * load its target or be started); `i` is the index it is named by (a worker set's worker id).
 */
export function exceptionFor(child: ChildHandle, i = child.index ?? 0): Error {
  if (child.startError || child.error?.load) return child.failure(i)!;
  if (child.error) {
    const message = `\n\n-- Process ${i} terminated with the following error:\n${child.error.trace}`;
    return new ProcessRaisedException(message, i, child.pid, { cause: child.failure(i)! });
  }
  const code = child.exitCode ?? 0;
  if (child.signalName) {
    return new ProcessExitedException(`process ${i} terminated with signal ${child.signalName}`, i, child.pid, code, child.signalName);
  }
  return new ProcessExitedException(`process ${i} terminated with exit code ${code}`, i, child.pid, code);
}

function warn(message: string): void {
  // torch logs these at WARNING; Node's counterpart is a process warning (stderr by
  // default, observable with process.on('warning')).
  process.emitWarning(message, { type: 'TensorprocWarning', code: 'TP_PROCESS_STOPPING' });
}

/** A grace period as #waitUntil() takes it: null for no limit (Infinity). */
function timerMs(grace: number): number | null {
  return grace === Infinity ? null : grace;
}

function joinOptions(options: JoinOptions | number | null | undefined): JoinOptions {
  if (options === undefined || options === null) return {};
  if (typeof options === 'number') return { timeout: options };
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidArgumentError(`join() takes { timeout?, gracePeriod? } or a timeout in milliseconds (got ${describe(options)}).`);
  }
  for (const key of Object.keys(options)) {
    if (key !== 'timeout' && key !== 'gracePeriod') {
      throw new InvalidArgumentError(`join() has no option '${key}'. Its options: timeout, gracePeriod (milliseconds).`);
    }
  }
  return options;
}

/**
 * A checked `timeout` or `gracePeriod`: null when not given. Past setTimeout's limit (about
 * 24.8 days) Node would fire after 1 ms, so a longer time is no limit: null for a timeout
 * (wait as long as it takes), Infinity for a grace period (null there means no grace).
 */
function checkMs(value: number | null | undefined, name: 'timeout' | 'gracePeriod'): number | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'number' || !(value >= 0)) {
    throw new InvalidArgumentError(
      `join(): ${name} must be a number of milliseconds >= 0, or null to wait without limit (got ${String(value)}).`,
    );
  }
  if (value > 0x7fffffff) return name === 'timeout' ? null : Infinity;
  return value;
}
