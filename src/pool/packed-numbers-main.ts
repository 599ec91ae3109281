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
 */
export function runPacked(fn: Function, items: ArrayLike<unknown>, from: number, to: number): PackedRun {
  const nums = new Float64Array(to - from);
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
  const ints = new Int32Array(nums);
  const back = new Float64Array(ints);
  return Buffer.from(back.buffer).equals(Buffer.from(nums.buffer, nums.byteOffset, nums.byteLength)) ? ints : nums;
}
