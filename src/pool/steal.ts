// Taking back chunks a busy worker holds and has not begun, for a worker that is idle
// (pool/scheduler.ts).
//
// NOTE [Pool stealing]
// CPython's pool has one task queue that every worker takes from, so an idle worker never
// waits while another has work queued behind a long task. This pool gives each worker a
// window of chunks ahead (NOTE [Pool windows]), which is what makes tiny tasks fast, and so
// commits chunks to a worker before it is free. When a worker is idle and nothing can be
// given to it (no call has a chunk to give, or an imap has as many chunks out as its
// buffersize allows, some of them behind a busy worker), the scheduler takes back half
// (rounded up) of the chunks not begun of the
// worker that holds most, and gives them to whoever has room, the idle one first, in front
// of everything else (as NOTE [Pool redispatch] does for a dead worker's).
// The taking back is a range of sequence numbers [from, to) in the control block (NOTE
// [Pool control block]), written before the parent reads the worker's progress word; a
// worker stores its progress before it reads the range, and runs no chunk in it (it says
// STOLEN in its DONE instead). So a chunk after the progress the parent read is never
// begun: it goes to another worker at once. A chunk at or before it may have been begun or
// skipped: it stays where it is, and the worker's DONE says which (STOLEN: it is given
// again then). Nothing runs twice, nothing is lost.
// While a worker has not reported every chunk up to its range's end it gets no new chunks
// (it is the slow one), and a further steal from it only lowers `from`: the range it reads
// only ever grows, and an old range never covers a chunk given after it.
import type { Retry } from './redispatch.js';
import { stealFromWord, stealToWord } from './messages.js';
import { MASK, type WorkerState } from './worker-state.js';

/** Whether worker `w` has a stolen range it has not reported through yet (it gets no new chunks until then). */
export function stealPending(w: WorkerState): boolean {
  return ((w.doneSeq - w.stealTo) | 0) < 0;
}

/** The first chunk of `w` not begun, by its progress word `progress`. */
function firstNotBegun(w: WorkerState, progress: number): number {
  const next = (progress + 1) | 0;
  return ((next - w.doneSeq) | 0) > 0 ? next : w.doneSeq;
}

/** The end of the chunks of `w` that may still be stolen: its range's start while one is pending. */
function stealableEnd(w: WorkerState): number {
  return stealPending(w) ? w.stealFrom : w.nextSeq;
}

/**
 * When a worker is idle (alive, ready, holding nothing) and there is nothing else to give:
 * the chunks taken back from the worker that holds most not begun, in order, to be given
 * again before anything else. Empty when there is none to take.
 */
export function stealForIdle(workers: readonly WorkerState[], ctl: Int32Array): Retry[] {
  const size = workers.length;
  let idle = false;
  for (const w of workers) if (w.alive && w.ready && w.inFlight() === 0) idle = true;
  if (!idle) return [];
  let victim = -1;
  let most = 0;
  for (let id = 0; id < size; id++) {
    const w = workers[id]!;
    if (!w.alive || w.inFlight() === 0) continue;
    const n = (stealableEnd(w) - firstNotBegun(w, Atomics.load(ctl, id))) | 0;
    if (n > most) {
      most = n;
      victim = id;
    }
  }
  if (victim < 0) return [];
  const w = workers[victim]!;
  const pending = stealPending(w);
  const end = stealableEnd(w);
  const from = (end - Math.ceil(most / 2)) | 0;
  // The range first, then the progress (NOTE [Pool stealing]). A new range: `from` before
  // `to`, so that a worker reading between them sees an empty range, never a wider one.
  Atomics.store(ctl, stealFromWord(size, victim), from);
  if (!pending) Atomics.store(ctl, stealToWord(size, victim), end);
  w.stealFrom = from;
  if (!pending) w.stealTo = end;
  let seq = firstNotBegun(w, Atomics.load(ctl, victim));
  if (((seq - from) | 0) < 0) seq = from;
  const back: Retry[] = [];
  for (; seq !== end; seq = (seq + 1) | 0) {
    const at = seq & MASK;
    const call = w.calls[at];
    if (call === null || call === undefined) continue;
    back.push({ call, index: w.index[at]!, kept: w.kept[at] });
    w.calls[at] = null;
    w.kept[at] = undefined;
    w.assigned--;
    if (call === w.exclusive && --w.exclusiveCount === 0) w.exclusive = null;
  }
  return back;
}
