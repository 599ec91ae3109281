// spawn() and startProcesses(): check everything, then start nprocs children that each run
// fn(i, ...args), and either join them or hand back their ProcessContext.
import { InvalidArgumentError } from '../errors.js';
import { CHILD_FD_BASE, type EncodedArgs } from './args.js';
import { encodeArgs } from './args-encode.js';
import { checkNotLoading } from './bootstrap.js';
import type { ChildHandle } from './child-handle.js';
import { ProcessContext } from './context.js';
import { childExecArgv, loaderApiForThreads } from './exec-argv.js';
import type { StartMessage, StartMethod } from './messages.js';
import { ProcessChild } from './process-child.js';
import { resolveTarget, type Target } from './target.js';
import { ThreadChild } from './thread-child.js';
import { isMainThread } from 'node:worker_threads';

export interface SpawnOptions {
  /** Passed after the index: fn(i, ...args). Structured-clonable values and tensorproc objects. */
  args?: readonly unknown[];
  /** How many children, a positive integer. Default 1. */
  nprocs?: number;
  /** true (default): resolve when all exited 0, reject with the first failure. false: resolve to the ProcessContext once started. */
  join?: boolean;
  /** true: the children never keep this process alive (they still die with it). Default false. */
  daemon?: boolean;
}

export interface StartProcessesOptions extends SpawnOptions {
  /** 'spawn' (default): a fresh Node process each. 'thread': a worker thread each. */
  startMethod?: StartMethod;
}

const ENTRIES: Record<StartMethod, string> = { spawn: 'child-process', thread: 'child-thread' };
// The bootstrap files sit beside this one, compiled (.js) or, under a TypeScript loader, not (.ts).
const EXT = import.meta.url.slice(import.meta.url.lastIndexOf('.'));

/** Starts nprocs children running `target`. See startProcesses; the start method is always 'spawn'. */
export function spawn(target: Target, options: SpawnOptions & { join: false }): ProcessContext;
export function spawn(target: Target, options?: SpawnOptions & { join?: true }): Promise<void>;
export function spawn(target: Target, options?: SpawnOptions): Promise<void> | ProcessContext;
export function spawn(target: Target, options: SpawnOptions = {}): Promise<void> | ProcessContext {
  return startProcesses(target, { ...options, startMethod: 'spawn' });
}

/**
 * Starts nprocs children, each running `await fn(i, ...args)`.
 *
 * `join: true` (default): a Promise that resolves when all exited 0 and rejects with the first
 * failure. `join: false`: the ProcessContext at once, as torch returns it. The children start
 * as soon as the target module has been loaded and checked (an import, hence not synchronous):
 * `await ctx.started` for their pids; a bad target rejects `ctx.started` and `ctx.join()`, and
 * then no child was started. Checks that need no import (nprocs, startMethod, args that cannot
 * travel) throw synchronously with `join: false` and reject the Promise with `join: true`.
 */
export function startProcesses(target: Target, options: StartProcessesOptions & { join: false }): ProcessContext;
export function startProcesses(target: Target, options?: StartProcessesOptions & { join?: true }): Promise<void>;
export function startProcesses(target: Target, options?: StartProcessesOptions): Promise<void> | ProcessContext;
export function startProcesses(target: Target, options: StartProcessesOptions = {}): Promise<void> | ProcessContext {
  const { join = true } = options;
  let context: ProcessContext;
  try {
    context = createContext(target, options);
  } catch (e) {
    if (!join) throw e;
    return Promise.reject(e);
  }
  if (!join) return context;
  return (async () => {
    while (!(await context.join()));
  })();
}

function createContext(target: Target, options: StartProcessesOptions): ProcessContext {
  checkNotLoading();
  const { args = [], nprocs = 1, daemon = false, startMethod = 'spawn' } = options;
  if (!Number.isInteger(nprocs) || nprocs < 1) {
    throw new InvalidArgumentError(`nprocs must be a positive integer (got ${String(nprocs)}).`);
  }
  if (startMethod !== 'spawn' && startMethod !== 'thread') {
    throw new InvalidArgumentError(`startMethod must be 'spawn' or 'thread' (got ${String(startMethod)}).`);
  }
  if (!Array.isArray(args)) throw new InvalidArgumentError('args must be an array: fn is called as fn(i, ...args).');
  const encoded = encodeArgs(args, nprocs);
  const children: ChildHandle[] = [];
  const context = new ProcessContext(children, daemon);
  context.setStarted(launch(target, context, children, { nprocs, daemon, startMethod, encoded }));
  return context;
}

async function launch(
  target: Target, context: ProcessContext, children: ChildHandle[],
  opts: { nprocs: number; daemon: boolean; startMethod: StartMethod; encoded: EncodedArgs },
): Promise<void> {
  const { nprocs, daemon, startMethod, encoded } = opts;
  const entry = new URL(`./${ENTRIES[startMethod]}${EXT}`, import.meta.url);
  const onExit = (c: ChildHandle): void => context.onExit(c);
  try {
    const { url, exportName } = await resolveTarget(target); // a bad target: no child, below
    const execArgv = startMethod === 'spawn' ? childExecArgv() : [];
    const preload = startMethod === 'thread' ? loaderApiForThreads() : null;
    for (let index = 0; index < nprocs; index++) {
      const start: StartMessage = {
        kind: 'start',
        index,
        module: url,
        exportName,
        args: encoded.bytes,
        // See NOTE [Spawn arguments]: slots in a process child, the same numbers in a thread.
        fds: startMethod === 'spawn' ? encoded.fds.map((_, k) => CHILD_FD_BASE + k) : encoded.fds,
        preload,
      };
      const child = startMethod === 'spawn'
        ? new ProcessChild(start, { entry, execArgv, daemon, argFds: encoded.fds }, onExit)
        : new ThreadChild(start, { entry, daemon }, onExit);
      children.push(child);
      child.markRunning();
    }
  } catch (e) {
    // A bad target, or could not start them all (out of descriptors, say): leave nothing
    // running. With none started, every copy's reference is taken back. Known gap: when some had started, the
    // references of the copies that never started (and of killed children that had not yet
    // adopted theirs) stay counted; a memfd's segment then never recycles, and a named one
    // is left to the manager's grace rule (NOTE [The file_system manager]).
    if (children.length === 0) encoded.abandon();
    for (const c of children) c.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    encoded.release();
    throw e;
  }
  // NOTE [Spawn arguments]: a process child has its descriptors once started; a thread
  // child duplicates the numbers when it decodes them, and says so.
  if (startMethod === 'spawn') {
    encoded.release();
  } else {
    pendingArgs.add(encoded);
    void Promise.all(children.map((c) => (c as ThreadChild).argsTaken)).then(() => {
      pendingArgs.delete(encoded);
      encoded.release();
    });
  }
}

// Argument descriptors held for thread children still decoding. Threads share the process's
// descriptor table: a worker thread that spawned them and exits first closes them itself.
// A thread stopped by a signal exits through process.exit() too (NOTE [Stopping a thread
// child]); one ended by SIGKILL, or by terminate() while it ran a synchronous loop, cannot.
const pendingArgs = new Set<EncodedArgs>();
if (!isMainThread) {
  process.on('exit', () => {
    for (const encoded of pendingArgs) encoded.release();
  });
}
