// The messages between a Pool and its workers, defined once for both sides (pool.ts and
// pool/scheduler.ts in the parent, pool/worker-main.ts in the worker), over the worker set's
// channels (NOTE [Worker set]).
//
// NOTE [Pool protocol]
// Work goes to a worker in chunks (CPython's: `chunksize` items run as one unit); each chunk
// a worker is given has a sequence number of that worker's, one more than the last, and the
// worker runs its chunks in that order. Messages are flat arrays so that they travel as
// PLAIN frames (NOTE [Plain frames]): a few µs for a datagram of many chunks, where a frame
// per task would cost a system call and a wake-up each.
//  - parent → worker: TARGET defines a task function once per worker (an id for a module
//    and export, imported in the worker, never in the parent); RUN gives it consecutive
//    chunks, in groups that share a target, a call slot and a mode:
//      [RUN, firstSeq, (targetId, slot, gen, mode, chunkLen, count, items) × groups]
//    `items` holds the groups' chunks one after the other, each `chunkLen` long but the
//    last, which may be shorter.
//  - worker → parent: READY once its initializer has run; INIT_FAILED with the error if it
//    threw (the worker then exits); DONE for consecutive chunks, in order:
//      [DONE, firstSeq, count, elapsedUs, values, status, errors]
//    `values` holds the results of the chunks that succeeded, `chunkLen` each, one after
//    the other; `status` is null when all succeeded, else one code per chunk (OK, FAILED,
//    SKIPPED, STOLEN), and `errors` holds the errors of the FAILED ones (serialized, in order).
//    `elapsedUs` is how long the worker spent on them: the parent sizes its windows by it.
//  - The control block (NOTE [Pool control block]) says what messages cannot say in time.
export const RUN = 1;
export const TARGET = 2;
export const READY = 3;
export const DONE = 4;
export const INIT_FAILED = 5;

/** Fields of a group in a RUN message. */
export const GROUP_FIELDS = 7;

/** Group modes: the function is called as fn(item) (map, imap) or fn(...item) (starmap, apply). */
export const MODE_ITEM = 0;
export const MODE_STAR = 1;
/** Mode flag: the call can be aborted, so its chunks never share a DONE message with another call's (NOTE [Pool aborts]). */
export const MODE_ABORTABLE = 2;

export const OK = 0;
export const FAILED = 1;
export const SKIPPED = 2;
/** The worker found the chunk in its stolen range and did not run it (NOTE [Pool stealing]). */
export const STOLEN = 3;

/** A group's call slot when the call has none (its chunks cannot be skipped). */
export const NO_SLOT = -1;

/** At most this many chunks in one RUN or DONE message (well under PLAIN frames' limits). */
export const MAX_BATCH = 128;
/**
 * A RUN batch takes no more chunks once it holds this many items. Batches are for chunks
 * too small to be worth a message each; long chunks go one a message, in turn to each
 * worker with room, so that the first worker begins while the parent packs the next chunks
 * instead of waiting for all of them, and the next chunks go to the other worker (with a
 * window of many chunks, one batch of MAX_BATCH took a whole map's 8 chunks of 25,000).
 */
export const BATCH_ITEMS = 4096;

// NOTE [Pool control block]
// int32 words shared by a pool and every worker it starts (control-block.ts):
//  - progress word `id`: the sequence number of the chunk worker `id` last began. A worker
//    stores it before it runs a chunk, so after its death the parent knows which of the
//    chunks it held it had begun (lost with it: rejected, never run twice) and which not
//    (sent again, to another worker).
//  - generation word `size + slot`, per call slot. A call that is aborted, or that no
//    longer wants its results (a map that failed, an imap left early), adds one to its
//    slot's generation; a worker skips a chunk whose generation no longer matches and says
//    so (SKIPPED).
//  - stolen range words `size + CALL_SLOTS + 2 id` (from) and `+ 1` (to), per worker: the
//    chunks [from, to) of worker `id` that the parent has taken back to give to another
//    (NOTE [Pool stealing] in pool/steal.ts). Both 0 at first: an empty range.
// A worker stores its progress before it reads the generation, and the parent bumps the
// generation before it reads the progress (sequentially consistent atomics on one shared
// mapping): whichever order they meet in, a chunk is either skipped or seen to have begun
// (then its worker is stopped, NOTE [Pool aborts]), and both may happen, which costs a
// worker but loses nothing. The stolen range is read and written in the same order.
export const CALL_SLOTS = 4096;

export const genWord = (size: number, slot: number): number => size + slot;
export const stealFromWord = (size: number, id: number): number => size + CALL_SLOTS + 2 * id;
export const stealToWord = (size: number, id: number): number => size + CALL_SLOTS + 2 * id + 1;

export function controlWords(size: number): number {
  return size + CALL_SLOTS + 2 * size;
}

// NOTE [Packed numbers]
// A chunk of many numbers (map's default chunksize over a range: 25,000 items a chunk for
// W3's 200,000) is too long for a PLAIN frame (1,024 entries a container), and in a VALUE
// frame V8's serializer writes, and the walk visits, every number one by one: the parent
// spent about 0.6 µs an item on that, where CPython pickles a list of ints at a few ns each.
// So the items of a RUN group, and the values of a DONE message, that are PACK_MIN or more
// numbers travel as one typed array (Int32Array when every one is an int32 other than -0,
// else Float64Array: both exact), which both serializers copy as bytes. Readers index it as
// they index an array, and nothing typed reaches a task or a caller: each element is read
// out as the number it was.
// A user's first big map runs all of this before V8 has compiled it, where every pass over
// the items costs tens of ns an item (W3's first call: 0.6x torch's Pool). So the passes are
// few: a worker runs a long chunk (PACK_MIN or more items, fn(item)) writing each result
// straight into a Float64Array, with no result array and no packing pass after it
// (runPacked() in packed-numbers-main.ts); from the first result that is not a number on,
// the chunk's results go as they are, the numbers before it as numbers. It narrows the array
// to an Int32Array with native passes only (narrowNumbers()), into arrays it reuses from one
// chunk to the next (NOTE [Packed scratch]: fresh memory is costly). The parent copies the results out
// with one loop per kind of values (copyResults()), so that none is deoptimised by another
// kind, into an array made for the kind of the first results (resultArray(): for packed numbers, doubles). Such a chunk's results are a DONE message's only values: it takes that path when
// the batch holds no values yet (else its results join the batch's array, packed when it is
// sent, as before), and the batch is sent right after it.
export const PACK_MIN = 1024;

/** `xs` as a typed array when it is PACK_MIN or more numbers (NOTE [Packed numbers]), else `xs`. */
export function packNumbers(xs: unknown[] | Int32Array | Float64Array): unknown[] | Int32Array | Float64Array {
  return !Array.isArray(xs) || xs.length < PACK_MIN ? xs : (packRange(xs, 0, xs.length) ?? xs);
}

/**
 * xs[from .. to) as one typed array (NOTE [Packed numbers]), or null when one is not a
 * number. One pass that writes as it checks: the parent packs a map's chunk straight from
 * its input with it, where copying the chunk out first, then checking, then packing cost
 * three passes and an array to collect (the largest part of the parent's work at W3's
 * 25,000 items a chunk).
 */
export function packRange(xs: ArrayLike<unknown>, from: number, to: number): Int32Array | Float64Array | null {
  const n = to - from;
  const ints = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const x = xs[from + i];
    if (typeof x !== 'number') return null;
    if ((x | 0) !== x || (x === 0 && 1 / x < 0)) return packDoubles(xs, from, to, ints, i);
    ints[i] = x;
  }
  return ints;
}

/** packRange() from element `at` on, once one is not an int32: the rest as float64. */
function packDoubles(xs: ArrayLike<unknown>, from: number, to: number, ints: Int32Array, at: number): Float64Array | null {
  const out = new Float64Array(to - from);
  out.set(ints.subarray(0, at));
  for (let i = at; i < out.length; i++) {
    const x = xs[from + i];
    if (typeof x !== 'number') return null;
    out[i] = x;
  }
  return out;
}

/**
 * A map's result array of `n` slots, made for the kind of its first results: for packed
 * numbers (int32s or doubles alike) a double array at its full length at once, where
 * `new Array(n)` makes n slots for any value that the first double then copies whole into
 * a double array (for W3's 200,000 results: 1.6 MB more in the old generation inside the
 * call, and twice the time). A small-integer array made for a first chunk of int32s did the
 * same when a later chunk brought doubles (W3's first chunk, x*x below 25,000, is int32s;
 * the rest are not): in the runs where that chunk came back first, 1.6 MB more of fresh
 * memory, each 4 KiB page a fault (NOTE [Packed scratch]). Int32s in a double array read
 * back as the same numbers. Every slot is written before the array is handed out.
 */
export function resultArray(n: number, values: ArrayLike<unknown>): unknown[] {
  if (values instanceof Float64Array || values instanceof Int32Array) {
    const out: unknown[] = [0.5];
    out.length = n;
    return out;
  }
  return new Array(n);
}

/**
 * out[from + i] = values[at + i] for i < n. One loop per kind of `values` (packed doubles,
 * packed int32s, an array), each seeing one kind only: a map's first big call runs these
 * before V8 has compiled them, and one loop fed arrays by small chunks and typed arrays by
 * long ones (the W3 warm-up, then the call) was deoptimised and ran 2-3x longer.
 */
export function copyResults(out: unknown[], from: number, values: ArrayLike<unknown>, at: number, n: number): void {
  if (values instanceof Float64Array) copyDoubles(out, from, values, at, n);
  else if (values instanceof Int32Array) copyInts(out, from, values, at, n);
  else for (let i = 0; i < n; i++) out[from + i] = values[at + i];
}

function copyDoubles(out: unknown[], from: number, values: Float64Array, at: number, n: number): void {
  for (let i = 0; i < n; i++) out[from + i] = values[at + i];
}

function copyInts(out: unknown[], from: number, values: Int32Array, at: number, n: number): void {
  for (let i = 0; i < n; i++) out[from + i] = values[at + i];
}
