// Chunks given to another worker than the first (pool/scheduler.ts): those a worker held and
// had not begun when it ended (NOTE [Pool control block]), those of a batch that could not be
// sent (refused: NOTE [Pool redispatch]); and the worker a maxtasksperchild pool replaces once
// it has run its share.
//
// NOTE [Pool redispatch]
// When a worker ends, the chunks it held are sorted by its progress word: those it had
// begun are lost with it and reject their calls (lostError: a chunk is never run twice,
// CPython's rule for a task whose worker died, without CPython's hang); those it had not
// begun go in front of every other call's chunks, in their order, to whichever worker has
// room first. A batch that cannot be encoded fails the calls whose items cannot travel and
// goes back in front too, to be sent in smaller batches. A worker recycled by maxtasksperchild is given no more chunks once it has
// been given its share (the scheduler's room counts them), and is replaced only once every
// one of them is back: nothing is taken back, lost or run twice.
import { ProcessExitedException, TooManyDescriptorsError } from '../errors.js';
import { checkMessage } from '../transport/index.js';
import type { Call, Taken } from './calls.js';
import { MASK, type WorkerState } from './worker-state.js';
import type { WorkerExit } from '../workers/worker-set.js';

/** A chunk to give again: its call, its index there, what the call kept to resend it. */
export interface Retry {
  readonly call: Call;
  readonly index: number;
  readonly kept: unknown;
}

/** The chunks to give again, in front of everything else, in order. */
export class RetryQueue {
  #list: Retry[] = [];

  /** `finished(call)`: a chunk of `call` leaves the pool's work without a result. */
  constructor(private readonly finished: (call: Call) => void) {}

  get length(): number {
    return this.#list.length;
  }

  /** How many tasks its chunks hold (pool.stats()). */
  tasks(): number {
    let n = 0;
    for (const r of this.#list) if (!r.call.settled) n += r.call.lengthOf(r.index, r.kept);
    return n;
  }

  /** Chunks taken for a batch that was not sent, back in front, in order (the settled ones are let go when next taken). */
  putBack(chunks: readonly Retry[]): void {
    this.#list.unshift(...chunks.map(({ call, index, kept }) => ({ call, index, kept })));
  }

  /** Drops every chunk of `call` (it no longer wants them). */
  drop(call: Call): void {
    if (this.#list.length === 0) return;
    const kept = this.#list.filter((r) => r.call !== call);
    for (let k = kept.length; k < this.#list.length; k++) this.finished(call);
    this.#list = kept;
  }

  /**
   * Moves chunks into `out` until it holds `max`, each with its items again; when `only` is
   * not null, only that call's. Returns the call the batch is then kept to: `only`, or the
   * first call with a signal taken (NOTE [Pool aborts]).
   */
  take(out: Taken[], max: number, only: Call | null): Call | null {
    for (let r = 0; r < this.#list.length && out.length < max; ) {
      const { call, index, kept } = this.#list[r]!;
      if (call.settled) {
        this.#list.splice(r, 1);
        this.finished(call);
        continue;
      }
      if (only !== null && call !== only) {
        r++;
        continue;
      }
      this.#list.splice(r, 1);
      if (call.abortable) only = call;
      out.push({ call, index, kept, items: call.resend(index, kept) });
    }
    return only;
  }

  /**
   * Worker `id` (state `w`) ended as `exit`, its progress word reading `progress`: the chunks
   * it held are sorted as NOTE [Pool redispatch] says, and it holds none after.
   */
  takeBack(id: number, w: WorkerState, progress: number, exit: WorkerExit): number {
    const back: Retry[] = [];
    let lost = 0;
    for (let seq = w.doneSeq; seq !== w.nextSeq; seq = (seq + 1) | 0) {
      const at = seq & MASK;
      const call = w.calls[at];
      if (call === null || call === undefined) continue; // taken back already (NOTE [Pool stealing])
      const index = w.index[at]!;
      const kept = w.kept[at];
      w.calls[at] = null;
      w.kept[at] = undefined;
      const started = ((seq - progress) | 0) <= 0;
      if (call.settled) this.finished(call);
      else if (!started) back.push({ call, index, kept });
      else {
        lost += call.lengthOf(index, kept);
        call.failed(index, lostError(id, exit));
        this.finished(call);
      }
    }
    w.doneSeq = w.nextSeq;
    w.exclusive = null;
    w.exclusiveCount = 0;
    this.#list.unshift(...back);
    return lost;
  }

  /**
   * Chunks `taken` could not be encoded as one batch (`e`): the calls whose items cannot
   * travel fail (`cancel(call)` first), and every chunk goes back in front, to go in smaller
   * batches (a batch of too many descriptors is no one call's fault).
   */
  refuse(taken: readonly Taken[], e: unknown, cancel: (call: Call) => void): void {
    let culprit = false;
    for (const t of taken) {
      if (t.call.settled) continue;
      try {
        checkMessage(t.items, 'items');
      } catch (err) {
        culprit = true;
        cancel(t.call);
        t.call.fail(err);
      }
    }
    if (!culprit && !(e instanceof TooManyDescriptorsError && taken.length > 1)) {
      // Nothing to blame on one call: all of them fail with it (not seen to happen).
      for (const t of taken) if (!t.call.settled) t.call.fail(e);
    }
    this.putBack(taken);
  }

  clear(): void {
    this.#list = [];
  }
}

/** maxtasksperchild: whether worker `w` has been given its share and every chunk of it is back (NOTE [Pool redispatch]). */
export function spent(w: WorkerState, maxTasks: number): boolean {
  return w.assigned >= maxTasks && w.inFlight() === 0 && w.alive;
}

/** What a chunk lost with its worker rejects with: how the worker ended (exit code 0 included, mid-task). */
function lostError(id: number, exit: WorkerExit): Error {
  return exit.error ?? new ProcessExitedException(`process ${id} terminated with exit code ${exit.exitCode}`, id, exit.pid, exit.exitCode);
}
