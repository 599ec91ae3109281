// A pool worker's fast path for a long chunk of numbers (NOTE [Packed numbers], messages.ts):
// the results written straight into a typed array while they are numbers, then narrowed to
// int32s when that is exact. Worker side only; the parent's side of the same design is
// packRange(), copyResults() and resultArray() in messages.ts.

/** A long chunk run by runPacked(). */
export type PackedRun =
  /** Every result a number: all of them, packed. */
  | { packed: Int32Array | Float64Array; before: null; stop: number; result: undefined }
  /** Result `stop` is not a number: the numbers before it, and that result (fn is not called again for it). */
  | { packed: null; before: number[]; stop: number; result: unknown };

/**
 * fn(items[i]) for i in [from, to). While the results are numbers they go into one
 * Float64Array, narrowed at the end (narrowNumbers()); at the first that is not, the run
 * stops and hands back the numbers before it as an array and that result, for the caller
 * to go on with as it does for any chunk. fn is called once an item, in order.
 * The packed array is the worker's scratch (NOTE [Packed scratch]): good until the next run.
 */
export function runPacked(fn: Function, items: ArrayLike<unknown>, from: number, to: number): PackedRun {
  const nums = scratchNums(to - from);
  const stop = runNumbers(fn, items, from, to, nums);
  if (stop === to) return { packed: narrowNumbers(nums), before: null, stop, result: undefined };
  const result = notNumber;
  notNumber = undefined;
  const before: number[] = [];
  for (let j = 0; j < stop - from; j++) before.push(nums[j]!);
  return { packed: null, before, stop, result };
}

/**
 * fn(items[i]) for i in [from, to) into nums[i - from], while the results are numbers; the
 * index of the first that is not (kept in `notNumber`: fn is not called twice), else `to`.
 * One tight loop of its own: a user's first big map runs it before V8 has compiled it,
 * where a result array and a packing pass after it each cost as much again.
 */
function runNumbers(fn: Function, items: ArrayLike<unknown>, from: number, to: number, nums: Float64Array): number {
  for (let i = from; i < to; i++) {
    const r: unknown = fn(items[i]);
    if (typeof r !== 'number') {
      notNumber = r;
      return i;
    }
    nums[i - from] = r;
  }
  return to;
}
/** The result runNumbers() stopped at. */
let notNumber: unknown;

/**
 * `nums` as an Int32Array when every one is an int32 other than -0, else `nums`. Native
 * passes only (convert, convert back, compare bytes: -0, NaN and what ToInt32 wraps differ
 * in their bytes), so that it costs nothing before V8 has compiled anything.
 */
export function narrowNumbers(nums: Float64Array): Int32Array | Float64Array {
  const mine = scratch !== null && scratch.nums === nums ? scratch : null;
  const ints = mine?.ints ?? new Int32Array(nums.length);
  const back = mine?.back ?? new Float64Array(nums.length);
  ints.set(nums);
  back.set(ints);
  return Buffer.from(back.buffer).equals(Buffer.from(nums.buffer, nums.byteOffset, nums.byteLength)) ? ints : nums;
}

// NOTE [Packed scratch]
// A long chunk's three arrays (its results, and narrowNumbers()' two) are made once per
// chunk length and reused, chunk after chunk: a typed array's memory is fresh at each
// allocation until a collection frees the ones before, and on machines where a page fault
// is costly (about 16 µs a 4 KiB page on the shared 2-core VMs, measured 2026-12-06) a
// 25,000-item chunk's 500 KB of fresh arrays cost a worker about 2 ms a chunk in faults
// alone. Reuse is safe because a packed run's results are encoded (copied) into their DONE
// frame before the worker runs another chunk (Runner.#record() sends at once); the arrays
// are whole (never views of a larger buffer: the serializer would send all of it). Lengths
// past SCRATCH_MAX are not kept, so a worker holds at most about 1.3 MB of them.
const SCRATCH_MAX = 1 << 16;

interface Scratch {
  nums: Float64Array;
  ints: Int32Array;
  back: Float64Array;
}

let scratch: Scratch | null = null;

/** The results array for a chunk of `n` items: the kept one when `n` is its length, else new (kept, with its two, when n <= SCRATCH_MAX). */
function scratchNums(n: number): Float64Array {
  if (scratch !== null && scratch.nums.length === n) return scratch.nums;
  if (n > SCRATCH_MAX) return new Float64Array(n);
  scratch = { nums: new Float64Array(n), ints: new Int32Array(n), back: new Float64Array(n) };
  return scratch.nums;
}
