// The worker's fast path for long chunks of numbers (NOTE [Packed numbers]), called directly:
// the pool-level tests (pool-api.test.ts) pass whether or not a chunk takes this path, so
// its edge cases are checked here, where a broken fast path fails.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { narrowNumbers, runPacked } from '../../src/pool/packed-numbers-main.js';

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

/** fn, counting its calls. */
function counted(f: (x: unknown) => unknown): { fn: (x: unknown) => unknown; calls: unknown[] } {
  const calls: unknown[] = [];
  return { fn: (x) => (calls.push(x), f(x)), calls };
}

function assertSame(got: ArrayLike<unknown>, want: readonly unknown[]): void {
  assert.equal(got.length, want.length);
  for (let i = 0; i < want.length; i++) assert.ok(Object.is(got[i], want[i]), `element ${i}: ${String(got[i])} for ${String(want[i])}`);
}

describe('packed numbers, worker side (runPacked, narrowNumbers)', () => {
  it('int32 results pack as an Int32Array, at both ends of the int32 range', () => {
    const items = [0, 1, -1, 2 ** 31 - 1, -(2 ** 31), 7];
    const { fn, calls } = counted((x) => x);
    const run = runPacked(fn, items, 0, items.length);
    assert.ok(run.packed instanceof Int32Array);
    assertSame(run.packed, items);
    assert.deepEqual(calls, items, 'fn called once an item, in order');
  });

  it('results that overflow int32, -0, NaN, fractions and infinities stay exact as a Float64Array', () => {
    const cases: number[][] = [
      [1, 2 ** 31], // one past int32
      [1, -(2 ** 31) - 1],
      [3, 2 ** 32 + 3], // ToInt32 wraps it to 3: the narrowing must not
      [0, -0],
      [0, Number.NaN],
      [0, 0.5],
      [0, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY],
      [Number.MAX_VALUE, Number.MIN_VALUE, -Number.MAX_SAFE_INTEGER],
    ];
    for (const items of cases) {
      const run = runPacked((x: unknown) => x, items, 0, items.length);
      assert.ok(run.packed instanceof Float64Array, `${items.map(String).join(',')} as doubles`);
      assertSame(run.packed, items);
    }
    // x*x over W3's range: int32 up to 46340, then past it.
    const squares = runPacked((x: unknown) => (x as number) * (x as number), range(50_000), 25_000, 50_000);
    assert.ok(squares.packed instanceof Float64Array);
    assertSame(
      squares.packed,
      range(25_000).map((i) => (i + 25_000) ** 2),
    );
    const small = runPacked((x: unknown) => (x as number) * (x as number), range(50_000), 0, 46_341);
    assert.ok(small.packed instanceof Int32Array, '46340² fits int32');
    assert.equal(small.packed[46_340], 46_340 ** 2);
  });

  it('only [from, to) runs, read from the items as given (an array or packed items)', () => {
    for (const items of [range(100), Int32Array.from(range(100)), Float64Array.from(range(100), (x) => x + 0.5)]) {
      const { fn, calls } = counted((x) => -(x as number));
      const run = runPacked(fn, items, 40, 60);
      assert.equal(calls.length, 20);
      assertSame(
        run.packed!,
        Array.from(items.slice(40, 60) as ArrayLike<number>, (x) => -x),
      );
    }
  });

  it('a chunk whose first results are numbers and a later one an object stops there, fn not called twice', () => {
    const obj = { n: 1 };
    const results: unknown[] = [1, -0, Number.NaN, 2 ** 40, obj, 5, 'six'];
    const { fn, calls } = counted((i) => results[i as number]);
    const run = runPacked(fn, range(results.length), 0, results.length);
    assert.equal(run.packed, null);
    assert.equal(run.stop, 4);
    assert.equal(run.result, obj, 'the very result, not a copy');
    assertSame(run.before!, [1, -0, Number.NaN, 2 ** 40]);
    assert.ok(Array.isArray(run.before));
    assert.deepEqual(calls, [0, 1, 2, 3, 4], 'fn stopped at the object; the caller runs the rest');
    // The next run does not see this one's result.
    const again = runPacked((x: unknown) => x, [1, 2], 0, 2);
    assertSame(again.packed!, [1, 2]);
  });

  it('a first result that is not a number, undefined, a bigint or a promise stops at once', () => {
    for (const r of [undefined, null, 'x', 10n, Promise.resolve(1), [1]]) {
      const { fn, calls } = counted(() => r);
      const run = runPacked(fn, range(10), 3, 10);
      assert.equal(run.packed, null);
      assert.equal(run.stop, 3);
      assert.equal(run.result, r);
      assert.deepEqual(run.before, []);
      assert.equal(calls.length, 1);
    }
    // An error thrown by fn goes to the caller (its chunk fails).
    assert.throws(
      () =>
        runPacked(
          (x: unknown) => {
            if (x === 5) throw new RangeError('five');
            return x;
          },
          range(10),
          0,
          10,
        ),
      RangeError,
    );
  });

  it('runs reuse their arrays (NOTE [Packed scratch]): each right when read, each a whole buffer', () => {
    const whole = (a: Int32Array | Float64Array): void =>
      assert.equal(a.byteLength, a.buffer.byteLength, 'not a view: the serializer would send the whole buffer');
    const twice = runPacked((x: unknown) => (x as number) * 2, range(2_000), 0, 2_000);
    assert.ok(twice.packed instanceof Int32Array);
    whole(twice.packed);
    assertSame(
      twice.packed,
      range(2_000).map((x) => x * 2),
    );
    // The same length again: the same scratch, now with doubles, narrowing nothing.
    const halves = runPacked((x: unknown) => (x as number) + 0.5, range(2_000), 0, 2_000);
    assert.ok(halves.packed instanceof Float64Array);
    whole(halves.packed);
    assertSame(
      halves.packed,
      range(2_000).map((x) => x + 0.5),
    );
    // Other lengths, the last past the kept size: fresh arrays, as right.
    for (const n of [3_000, 70_000]) {
      const run = runPacked((x: unknown) => -(x as number) - 1, range(n), 0, n);
      assert.ok(run.packed instanceof Int32Array);
      whole(run.packed);
      assertSame(
        run.packed,
        range(n).map((x) => -x - 1),
      );
    }
  });

  it('narrowNumbers reads a view at an offset, and keeps an empty chunk', () => {
    const base = new Float64Array([9.5, 1, 2, 3]);
    const narrowed = narrowNumbers(base.subarray(1));
    assert.ok(narrowed instanceof Int32Array);
    assertSame(narrowed, [1, 2, 3]);
    assert.ok(narrowNumbers(new Float64Array(0)) instanceof Int32Array);
  });
});
