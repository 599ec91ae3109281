// Starting children, for startProcesses() and Process alike: all of them at once, or none.
import { onExit } from '../exit-hooks.js';
import { statSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { getSharingStrategy, STRATEGY_ENV } from '../sharing/strategy.js';
import { CHILD_FD_BASE, type EncodedArgs } from './args.js';
import type { ChildHandle } from './child-handle.js';
import { childExecArgv, loaderApiForThreads } from './exec-argv.js';
import type { Identity, StartMessage, StartMethod } from './messages.js';
import { PARENT_PID_ENV } from '../env.js';
import { ProcessChild } from './process-handle.js';
import type { TargetSpec } from './target.js';
import { ThreadChild } from './thread-handle.js';

// The bootstrap programs sit in src/programs/, compiled (.js) or, under a TypeScript loader, not (.ts).
const EXT = import.meta.url.slice(import.meta.url.lastIndexOf('.'));
const THREAD_ENTRY = new URL(`../programs/thread-child${EXT}`, import.meta.url);
let processEntry: URL | null = null;

/**
 * The process child's bootstrap: its bundle when that was built after the last compile of
 * programs/process-child.js, or when there is no process-child.js beside it (the package
 * bundle's copy, dist/bundle/programs: NOTE [The package bundle]), else process-child.js
 * itself (NOTE [The process child's bundle]).
 * In an installed package (under node_modules) the bundle is always the one: nothing
 * compiles there, and the files' times are when npm unpacked them, in whatever order
 * (process-child.js came out a fraction of a millisecond after the bundle, which made every
 * child of an installed tensorproc load the unbundled bootstrap). Looked up once per process.
 */
export function processBootstrap(): URL {
  if (processEntry) return processEntry;
  const plain = new URL(`../programs/process-child${EXT}`, import.meta.url);
  const bundle = new URL('../programs/process-child.bundle.js', import.meta.url);
  processEntry = plain;
  if (EXT === '.js') {
    const mtime = (url: URL): number | null => {
      try {
        return statSync(url).mtimeMs;
      } catch {
        return null; // not there
      }
    };
    const built = mtime(bundle);
    const installed = bundle.pathname.includes('/node_modules/');
    if (built !== null && built >= (installed ? 0 : (mtime(plain) ?? 0))) processEntry = bundle;
  }
  return processEntry;
}

export interface ChildPlan {
  /** null: fn(...args) (a Process); else fn(index, ...args). */
  index: number | null;
  identity: Identity;
}

/**
 * Starts one child per plan, synchronously: their pids are known when this returns. If one
 * cannot be started (out of descriptors, say), those started are killed and the error is
 * thrown: nothing is left running. Either way `encoded` is released once no child needs its
 * descriptors any more (NOTE [Spawn arguments]).
 */
export function startChildren(
  spec: TargetSpec,
  encoded: EncodedArgs,
  options: { startMethod: StartMethod; daemon: boolean },
  plans: readonly ChildPlan[],
  onExit: (child: ChildHandle) => void,
): ChildHandle[] {
  const { startMethod, daemon } = options;
  const entry = startMethod === 'spawn' ? processBootstrap() : THREAD_ENTRY;
  // Children start with this process's sharing strategy unless they set their own: it
  // travels as the environment variable that sets a process's default.
  const env: NodeJS.ProcessEnv = { ...process.env, [STRATEGY_ENV]: getSharingStrategy() };
  if (startMethod === 'spawn') env[PARENT_PID_ENV] = String(process.pid);
  const execArgv = startMethod === 'spawn' ? childExecArgv() : [];
  const preload = startMethod === 'thread' ? loaderApiForThreads() : null;
  const children: ChildHandle[] = [];
  try {
    for (const { index, identity } of plans) {
      const start: StartMessage = {
        kind: 'start',
        index,
        module: spec.module,
        exportName: spec.exportName,
        base: spec.base,
        args: encoded.bytes,
        // See NOTE [Spawn arguments]: slots in a process child, the same numbers in a thread.
        fds: startMethod === 'spawn' ? encoded.fds.map((_, k) => CHILD_FD_BASE + k) : encoded.fds,
        preload,
        identity,
      };
      const child =
        startMethod === 'spawn'
          ? new ProcessChild(start, { entry, execArgv, daemon, argFds: encoded.fds, env }, onExit)
          : new ThreadChild(start, { entry, daemon, env }, onExit);
      children.push(child);
      child.markRunning();
    }
  } catch (e) {
    // With none started, every copy's reference is taken back. Known gap: when some had
    // started, the references of the copies that never started (and of killed children
    // that had not yet adopted theirs) stay counted; a memfd's segment then never
    // recycles, and a named one is left to the manager's grace rule (NOTE [The file_system
    // manager]).
    if (children.length === 0) encoded.abandon();
    for (const c of children) c.kill('SIGKILL');
    releaseWhenTaken(encoded, children, startMethod);
    throw e;
  }
  releaseWhenTaken(encoded, children, startMethod);
  return children;
}

/**
 * NOTE [Spawn arguments]: a process child has its descriptors once started; a thread child
 * duplicates the numbers when it decodes them, and says so (or exits).
 */
function releaseWhenTaken(encoded: EncodedArgs, children: ChildHandle[], startMethod: StartMethod): void {
  if (startMethod === 'spawn' || children.length === 0) {
    encoded.release();
    return;
  }
  pendingArgs.add(encoded);
  void Promise.all(children.map((c) => (c as ThreadChild).argsTaken)).then(() => {
    pendingArgs.delete(encoded);
    encoded.release();
  });
}

// Argument descriptors held for thread children still decoding. Threads share the process's
// descriptor table: a worker thread that spawned them and exits first closes them itself.
// A thread stopped by a signal exits through process.exit() too (NOTE [Stopping a thread
// child]); one ended by SIGKILL, or by terminate() while it ran a synchronous loop, cannot.
const pendingArgs = new Set<EncodedArgs>();
if (!isMainThread) {
  onExit(() => {
    for (const encoded of pendingArgs) encoded.release();
  });
}
