// spawn() and startProcesses(): check everything, then start nprocs children that each run
// fn(i, ...args), and either join them or hand back their ProcessContext.
import { InvalidArgumentError } from '../errors.js';
import { describeValue } from '../describe-value.js';
import { encodeArgs } from './args-encode.js';
import { checkNotLoading } from './bootstrap.js';
import type { ChildHandle } from './child-handle.js';
import { startChildren } from './child-start.js';
import { ProcessContext } from './context.js';
import { nextIdentity } from './current.js';
import type { StartMethod } from './messages.js';
import { checkOptions, checkStartMethod } from './options.js';
import { checkTarget, type Target } from './target.js';

export interface SpawnOptions {
  /** Passed after the index: fn(i, ...args). Structured-clonable values and tensorproc objects. */
  args?: readonly unknown[];
  /** How many children, a positive integer. Default 1. */
  nprocs?: number;
  /** true (default): resolve when all exited 0, reject with the first failure. false: the ProcessContext, at once. */
  join?: boolean;
  /** true: the children never keep this process alive (they still die with it). Default false. */
  daemon?: boolean;
}

export interface StartProcessesOptions extends SpawnOptions {
  /** 'spawn' (default): a fresh Node process each. 'thread': a worker thread each. */
  startMethod?: StartMethod;
}

const SPAWN_OPTIONS = ['args', 'nprocs', 'join', 'daemon'] as const;
const START_OPTIONS = [...SPAWN_OPTIONS, 'startMethod'] as const;

/** Starts nprocs children running `target`. See startProcesses; the start method is always 'spawn'. */
export function spawn(target: Target, options: SpawnOptions & { join: false }): ProcessContext;
export function spawn(target: Target, options?: SpawnOptions & { join?: true }): Promise<void>;
export function spawn(target: Target, options?: SpawnOptions): Promise<void> | ProcessContext;
export function spawn(target: Target, options?: SpawnOptions): Promise<void> | ProcessContext {
  return run(target, options, 'spawn', SPAWN_OPTIONS, 'spawn()');
}

/**
 * Starts nprocs children, each running `await fn(i, ...args)`.
 *
 * The children are started before this returns (ctx.pids() lists them); each imports and
 * checks the target itself (NOTE [Loading the target in the child]). `join: true`
 * (default): a Promise that resolves when all exited 0 and rejects with the first failure.
 * `join: false`: the ProcessContext. A child that cannot load its target fails with a
 * TargetNotFoundError, TargetNotFunctionError or TargetLoadError (its `errorIndex` and
 * `pid` say which child), thrown by join() and `ctx.started`. Bad options are thrown
 * synchronously with `join: false` and reject the Promise with `join: true`; either way no
 * child was started.
 */
export function startProcesses(target: Target, options: StartProcessesOptions & { join: false }): ProcessContext;
export function startProcesses(target: Target, options?: StartProcessesOptions & { join?: true }): Promise<void>;
export function startProcesses(target: Target, options?: StartProcessesOptions): Promise<void> | ProcessContext;
export function startProcesses(target: Target, options?: StartProcessesOptions): Promise<void> | ProcessContext {
  return run(target, options, undefined, START_OPTIONS, 'startProcesses()');
}

function run(
  target: Target,
  options: StartProcessesOptions | undefined,
  startMethod: StartMethod | undefined,
  known: readonly string[],
  what: string,
): Promise<void> | ProcessContext {
  // Read before any check, so that a caller who asked for the context gets the error thrown.
  const join = !(typeof options === 'object' && options !== null && options.join === false);
  let context: ProcessContext;
  try {
    const o = checkOptions<StartProcessesOptions>(options, known, what);
    context = createContext(target, o, startMethod ?? checkStartMethod(o.startMethod));
  } catch (e) {
    if (!join) throw e;
    return Promise.reject(e);
  }
  if (!join) return context;
  return (async () => {
    while (!(await context.join()));
  })();
}

function createContext(target: Target, options: StartProcessesOptions, startMethod: StartMethod): ProcessContext {
  checkNotLoading();
  const { args = [], nprocs = 1, daemon = false } = options;
  if (!Number.isInteger(nprocs) || nprocs < 1) {
    throw new InvalidArgumentError(`nprocs must be a positive integer (got ${describeValue(nprocs)}).`);
  }
  if (!Array.isArray(args)) throw new InvalidArgumentError('args must be an array: fn is called as fn(i, ...args).');
  const spec = checkTarget(target);
  const encoded = encodeArgs(args, nprocs);
  const children: ChildHandle[] = [];
  const context = new ProcessContext(children, daemon);
  const plans = Array.from({ length: nprocs }, (_, index) => ({ index, identity: nextIdentity(daemon) }));
  children.push(...startChildren(spec, encoded, { startMethod, daemon }, plans, (c) => context.onExit(c)));
  return context;
}
