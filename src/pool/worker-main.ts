// The Pool's worker main (NOTE [Pool protocol]): runs the initializer, then the chunks it is
// given, in order, and sends their results back in batches.
import { isMainThread } from 'node:worker_threads';
import { encodeMessage, type Frame } from '../transport/index.js';
import type { TargetSpec } from '../process/target.js';
import { loadTarget } from '../process/target-load.js';
import { markLoading } from '../process/bootstrap.js';
import { serializeError } from '../process/error-payload.js';
import { TooManyDescriptorsError } from '../errors.js';
import { END, NOTHING, workerMain, type WorkerPort } from '../workers/worker-port.js';
// Registers the reductions its start arguments arrive by (the block, the port).
import './control-block.js';
import type { ControlBlock } from './control-block.js';
import {
  DONE,
  FAILED,
  GROUP_FIELDS,
  INIT_FAILED,
  MAX_BATCH,
  MODE_ABORTABLE,
  MODE_STAR,
  NO_SLOT,
  OK,
  READY,
  RUN,
  SKIPPED,
  STOLEN,
  TARGET,
  genWord,
  stealFromWord,
  stealToWord,
  PACK_MIN,
  packNumbers,
} from './messages.js';
import { runPacked } from './packed-numbers-main.js';
import { type Batch, refuseUnsendable, split } from './result-batch-main.js';

export interface PoolWorkerStart {
  /** NOTE [Pool control block]. */
  control: ControlBlock;
  /** The pool's size: where the call generations start in the control block. */
  size: number;
  initializer: TargetSpec | null;
  initargs: unknown[];
}

/** 128 + SIGTERM, as a shell shows a process ended by it. */
const SIGTERM_EXIT_CODE = 143;
/** Results are sent at least this often (ms) while chunks keep running. */
const FLUSH_MS = 1;
/** A DONE message holds at most this many values when it can (PLAIN frames take 1,024 a container). */
const MAX_VALUES = 1000;

export const main = workerMain<[PoolWorkerStart]>(async ({ id, port, args: [start] }) => {
  let runner: Runner | null = null;
  // terminate() and an abort send SIGTERM: an idle worker, or one awaiting in a task, then
  // sends the results it has and exits through its exit handlers, letting go of what it
  // holds (its shared tensors' references among them); one busy in a synchronous loop gets
  // SIGKILL after a grace.
  if (isMainThread) {
    process.on('SIGTERM', () => {
      runner?.flush();
      void port.flushed().finally(() => process.exit(SIGTERM_EXIT_CODE));
    });
  }
  if (start.initializer !== null) {
    try {
      const init = await importTask(start.initializer);
      await init(...start.initargs);
    } catch (e) {
      port.send([INIT_FAILED, serializeError(e)]);
      await port.flushed();
      throw e;
    }
  }
  port.send([READY]);
  runner = new Runner(id, port, start);
  await runner.run();
});

/** Imports a task module, marked as loading (NOTE [Starting processes while loading]). */
function importTask(target: TargetSpec): Promise<(...args: unknown[]) => unknown> {
  const load = async (url: string): Promise<Record<string, unknown>> => {
    markLoading(url);
    try {
      return await import(url);
    } finally {
      markLoading(null);
    }
  };
  return loadTarget(target.module, target.exportName, target.base, load, null);
}

interface Group {
  /** The sequence number of its first chunk (NOTE [Pool protocol]). */
  first: number;
  target: number;
  slot: number;
  gen: number;
  mode: number;
  chunkLen: number;
  count: number;
  /** An array, or packed numbers (NOTE [Packed numbers]). */
  items: ArrayLike<unknown>;
}

type Loaded = { fn: Function } | { error: unknown };

/** No result computed yet (a result can be undefined). */
const NO_RESULT: unknown = Symbol('no result');

class Runner {
  readonly #id: number;
  readonly #port: WorkerPort;
  readonly #ctl: Int32Array;
  readonly #size: number;
  readonly #stealFrom: number;
  readonly #stealTo: number;
  readonly #targets = new Map<number, TargetSpec>();
  readonly #loaded = new Map<number, Loaded>();
  #groups: Group[] = [];
  #group = 0; // the group running
  #chunk = 0; // the next chunk in it
  #ending = false;
  // The batch of results not sent yet.
  #first = 0;
  #count = 0;
  /** An array, or one long chunk's numbers packed (NOTE [Packed numbers]). */
  #values: unknown[] | Int32Array | Float64Array = [];
  #lengths: number[] = [];
  #status: number[] | null = null;
  #errors: unknown[] | null = null;
  #since = 0;
  /** The call of the last chunk run, when it could be aborted (NOTE [Pool aborts]). */
  #lastKey = '';

  constructor(id: number, port: WorkerPort, start: PoolWorkerStart) {
    this.#id = id;
    this.#port = port;
    this.#ctl = start.control.words;
    this.#size = start.size;
    this.#stealFrom = stealFromWord(start.size, id);
    this.#stealTo = stealToWord(start.size, id);
  }

  async run(): Promise<void> {
    for (;;) {
      if (!this.#pending()) {
        this.flush();
        if (this.#ending) return;
        const m = await this.#port.next();
        if (m === END) return;
        this.#accept(m);
      }
      this.#takeWaiting();
      while (this.#pending()) await this.#runNext();
    }
  }

  #pending(): boolean {
    return this.#group < this.#groups.length;
  }

  /** Takes every message already waiting, without waiting. */
  #takeWaiting(): void {
    for (;;) {
      const m = this.#port.take();
      if (m === NOTHING) return;
      if (m === END) {
        this.#ending = true; // the chunks given before still run
        return;
      }
      this.#accept(m);
    }
  }

  #accept(m: unknown): void {
    const msg = m as unknown[];
    if (msg[0] === TARGET) {
      this.#targets.set(msg[1] as number, { module: msg[2] as string, exportName: msg[3] as string, base: msg[4] as string });
      return;
    }
    if (msg[0] !== RUN) throw new TypeError(`A pool worker got a message it does not know (${String(msg[0])}).`);
    if (this.#group === this.#groups.length) {
      this.#groups = [];
      this.#group = 0;
      this.#chunk = 0;
    }
    let first = msg[1] as number;
    for (let at = 2; at < msg.length; at += GROUP_FIELDS) {
      const count = msg[at + 5] as number;
      this.#groups.push({
        first,
        target: msg[at] as number,
        slot: msg[at + 1] as number,
        gen: msg[at + 2] as number,
        mode: msg[at + 3] as number,
        chunkLen: msg[at + 4] as number,
        count,
        items: msg[at + 6] as ArrayLike<unknown>,
      });
      first = (first + count) | 0;
    }
  }

  /** Runs the next chunk and records its result. */
  async #runNext(): Promise<void> {
    const g = this.#groups[this.#group]!;
    const k = this.#chunk;
    if (++this.#chunk === g.count) {
      this.#group++;
      this.#chunk = 0;
    }
    const seq = (g.first + k) | 0;
    // NOTE [Pool aborts]: the chunks of a call that can be aborted never share a batch of
    // results with another call's, so that stopping this worker loses only that call's.
    if (this.#count > 0 && ((g.mode & MODE_ABORTABLE) !== 0 || this.#lastKey !== '')) {
      const key = (g.mode & MODE_ABORTABLE) !== 0 ? `${g.slot}:${g.gen}` : '';
      if (key !== this.#lastKey) this.flush();
    }
    this.#lastKey = (g.mode & MODE_ABORTABLE) !== 0 ? `${g.slot}:${g.gen}` : '';
    // NOTE [Pool control block]: the sequence number first, then the generation.
    Atomics.store(this.#ctl, this.#id, seq);
    if (this.#count === 0) {
      this.#first = seq;
      this.#since = performance.now();
    }
    // NOTE [Pool stealing]: a chunk the parent has taken back is not run (after the progress
    // word, as the generation).
    const stolenFrom = Atomics.load(this.#ctl, this.#stealFrom);
    const stolenTo = Atomics.load(this.#ctl, this.#stealTo);
    if (((seq - stolenFrom) | 0) >= 0 && ((seq - stolenTo) | 0) < 0) {
      this.#record(STOLEN, 0, null);
      return;
    }
    if (g.slot !== NO_SLOT && Atomics.load(this.#ctl, genWord(this.#size, g.slot)) !== g.gen) {
      this.#record(SKIPPED, 0, null);
      return;
    }
    const from = k * g.chunkLen;
    const to = Math.min(from + g.chunkLen, g.items.length);
    const mark = this.#values.length;
    try {
      let loaded = this.#loaded.get(g.target);
      if (loaded === undefined) loaded = await this.#load(g.target);
      if ('error' in loaded) throw loaded.error;
      const fn = loaded.fn;
      const star = (g.mode & MODE_STAR) !== 0;
      let i = from;
      let r: unknown = NO_RESULT;
      // NOTE [Packed numbers]: a long chunk's results go straight into a typed array while
      // they are numbers, when the batch holds no values yet (#record() sends it at once).
      if (!star && to - from >= PACK_MIN && mark === 0) {
        const run = runPacked(fn, g.items, from, to);
        if (run.packed !== null) {
          this.#values = run.packed;
          this.#record(OK, to - from, null);
          return;
        }
        // Result run.stop is not a number: it and the ones after go as they are.
        this.#values = run.before;
        i = run.stop;
        r = run.result;
      }
      for (; i < to; i++) {
        if (r === NO_RESULT) {
          const item = g.items[i];
          r = star ? fn(...(item as unknown[])) : fn(item);
        }
        if (r !== null && (typeof r === 'object' || typeof r === 'function') && typeof (r as PromiseLike<unknown>).then === 'function')
          r = await r;
        (this.#values as unknown[]).push(r);
        r = NO_RESULT;
      }
    } catch (e) {
      (this.#values as unknown[]).length = mark;
      this.#record(FAILED, 0, serializeError(e));
      return;
    }
    this.#record(OK, to - from, null);
  }

  async #load(target: number): Promise<Loaded> {
    const t = this.#targets.get(target);
    let loaded: Loaded;
    try {
      loaded = { fn: await importTask(t!) };
    } catch (error) {
      loaded = { error };
    }
    this.#loaded.set(target, loaded);
    return loaded;
  }

  #record(status: number, length: number, error: unknown): void {
    if (status !== OK && this.#status === null) this.#status = new Array<number>(this.#count).fill(OK);
    this.#status?.push(status);
    if (status === FAILED) (this.#errors ??= []).push(error);
    this.#lengths.push(length);
    this.#count++;
    if (
      this.#count >= MAX_BATCH ||
      this.#values.length >= MAX_VALUES ||
      !Array.isArray(this.#values) ||
      performance.now() - this.#since >= FLUSH_MS
    )
      this.flush();
  }

  /** Sends the results not sent yet. */
  flush(): void {
    if (this.#count === 0) return;
    const elapsed = Math.round((performance.now() - this.#since) * 1000);
    const batch: Batch = { first: this.#first, status: this.#status, errors: this.#errors, values: this.#values, lengths: this.#lengths };
    this.#count = 0;
    this.#values = [];
    this.#lengths = [];
    this.#status = null;
    this.#errors = null;
    this.#send(batch, elapsed);
  }

  #send(b: Batch, elapsed: number): void {
    let frame: Frame;
    try {
      frame = encodeMessage([DONE, b.first, b.lengths.length, elapsed, packNumbers(b.values), b.status, b.errors]);
    } catch (e) {
      if (e instanceof TooManyDescriptorsError && b.lengths.length > 1) {
        for (const half of split(b)) this.#send(half, 0);
      } else {
        this.#send(refuseUnsendable(b), elapsed);
      }
      return;
    }
    // False: the parent is gone, or let this worker go: nothing it runs can arrive any more.
    if (!this.#port.sendFrame(frame)) {
      this.#ending = true;
      this.#groups = [];
      this.#group = this.#chunk = 0;
    }
  }
}
