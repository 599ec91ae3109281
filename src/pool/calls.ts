// One Pool call (map, starmap, apply, imap, imapUnordered) as the scheduler sees it: where
// its chunks come from (NOTE [Pool protocol]) and where their results go. A call makes no
// promise and no object per task: its chunks are taken into the scheduler's batches, and
// their results written where they belong. The kinds: ListCall (list-call.ts: map, starmap,
// apply) and IterCall (iter-call.ts: imap, imapUnordered).
import { AbortError } from '../errors.js';
import { NO_SLOT } from './messages.js';

/** What a call needs of the scheduler. */
export interface CallHost {
  /** The call may have chunks to give now (its consumer read on, its input arrived). */
  wake(): void;
  /** The call no longer wants its chunks run: drop those not started; `kill`: stop the workers running one. */
  cancel(call: Call, kill: boolean): void;
}

/** A chunk taken from a call, on its way to a worker. */
export interface Taken {
  readonly call: Call;
  readonly index: number;
  /** What the scheduler keeps to send the chunk again (retains): its item, or its items. */
  readonly kept: unknown;
  /** An array, or packed numbers (NOTE [Packed numbers]): read, never written. */
  readonly items: ArrayLike<unknown>;
}

export abstract class Call {
  /** Set by the scheduler: the call's slot in the control block, and its generation there. */
  slot = NO_SLOT;
  gen = 0;
  /** Chunks taken and not yet finished (at a worker, or waiting to be sent again). */
  inFlight = 0;
  /** The caller has its answer (results, an error, an abort): results that still arrive are dropped. */
  settled = false;
  /** take() will give no more chunks. */
  exhausted = false;
  /** Has an AbortSignal: its chunks never share a batch of results with another call's (NOTE [Pool aborts]). */
  abortable = false;
  #signal: AbortSignal | null = null;
  #onAbort: (() => void) | null = null;

  constructor(
    readonly host: CallHost,
    /** The task function's id in the scheduler (NOTE [Pool protocol], TARGET). */
    readonly target: number,
    readonly mode: number,
    readonly chunkLen: number,
    /** Whether the scheduler must keep a chunk's items to send it again (they cannot be read twice). */
    readonly retains: boolean,
  ) {}

  /** When the call was submitted (performance.now()): its chunks wait from then (NOTE [Pool stats]). */
  since = 0;

  /** Since when a chunk taken `now` has been waiting (NOTE [Pool stats]). */
  queuedAt(_now: number): number {
    return this.since;
  }
  /** Tasks not given out yet (pool.stats()). */
  abstract queuedTasks(): number;
  /** The next chunk; null when there is none now. */
  abstract take(): Taken | null;
  /** The items of chunk `index` again, for a resend; `kept` is what take() kept of them (retains). */
  abstract resend(index: number, kept: unknown): ArrayLike<unknown>;
  /** How many items chunk `index` has; for a call that retains, one, or as many as `kept` holds. */
  lengthOf(_index: number, kept: unknown): number {
    return this.chunkLen === 1 ? 1 : (kept as unknown[]).length;
  }
  /** Chunk `index` succeeded: its `n` results are values[at .. at + n). */
  abstract done(index: number, values: ArrayLike<unknown>, at: number, n: number): void;
  /** Chunk `index` failed (the task threw, its worker died): the call fails with `error`. */
  abstract failed(index: number, error: unknown): void;
  /** Ends the call for its caller with `error` (an abort, the pool terminated or broken). */
  abstract fail(error: unknown): void;

  /** Aborts the call on `signal` (NOTE [Pool aborts]). */
  listen(signal: AbortSignal | undefined): void {
    if (signal === undefined) return;
    this.#signal = signal;
    this.#onAbort = () => {
      if (this.settled) return;
      this.host.cancel(this, true);
      this.fail(new AbortError(undefined, { cause: signal.reason }));
    };
    signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  /** Marks the call settled and stops listening to its signal. */
  protected settle(): void {
    this.settled = true;
    if (this.#onAbort !== null) this.#signal!.removeEventListener('abort', this.#onAbort);
    this.#onAbort = null;
  }
}

/** CPython's default chunksize for map: ceil(len / (4 × processes)). */
export function defaultChunksize(length: number, processes: number): number {
  return Math.max(1, Math.ceil(length / (processes * 4)));
}
