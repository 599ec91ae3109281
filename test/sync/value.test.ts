// Value and Array: Python's typecodes, element access under the lock, the memory as a tensor
// without a copy, travel to other processes, and bad input.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from 'tensorproc';
import { settleBeforeLeakCheck } from './settle.js';
import { checkLeaks } from '../helpers/leaks.js';
import { throwsCoded } from '../helpers/errors.js';

settleBeforeLeakCheck();
checkLeaks();

// Children that use only their arguments: the same module serves the package and dist/src.
const targets = new URL('./fixtures/shared-targets.js', import.meta.url);
const target = (name: string) => ({ module: targets, export: name });

describe('Value', () => {
  test('typecodes map to dtypes, as on 64-bit Linux', () => {
    const cases: [mp.Typecode, string, mp.Scalar][] = [
      ['b', 'int8', -3],
      ['B', 'uint8', 250],
      ['h', 'int16', -300],
      ['H', 'uint16', 60000],
      ['i', 'int32', -7],
      ['I', 'uint32', 4e9],
      ['l', 'int64', -5n],
      ['L', 'uint64', 5n],
      ['q', 'int64', 2n ** 40n],
      ['Q', 'uint64', 2n ** 63n],
      ['f', 'float32', 0.5],
      ['d', 'float64', 0.1],
      ['?', 'bool', true],
      ['float16', 'float16', 1.5],
      ['bfloat16', 'bfloat16', 2],
    ];
    for (const [code, dtype, x] of cases) {
      const v = mp.Value(code, x);
      assert.equal(v.dtype, dtype, code);
      assert.equal(v.value, x, code);
    }
    assert.equal(mp.Value('i').value, 0, 'initial value 0 by default');
    assert.equal(mp.Value('q').value, 0n);
    assert.equal(mp.Value('d', 2.5, { lock: false }).value, 2.5);
  });

  test('with or without new, instanceof, getLock() an RLock of its own, or the lock given', () => {
    const v = new mp.Value('i', 1);
    assert.ok(v instanceof mp.Value && mp.Value('i') instanceof mp.Value);
    assert.ok(v.getLock() instanceof mp.RLock);
    const lock = new mp.Lock();
    assert.equal(mp.Value('i', 0, { lock }).getLock(), lock);
    throwsCoded(() => mp.Value('i', 0, { lock: false }).getLock(), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    // A Lock this thread holds guards the accesses: reading under it would wait for ever.
    const guarded = mp.Value('i', 0, { lock });
    lock.acquireSync();
    throwsCoded(() => guarded.value, mp.WouldDeadlockError, 'ERR_TP_WOULD_DEADLOCK');
    lock.release();
    // Its own RLock is re-entered by the accesses inside a held scope.
    {
      using _h = v.getLock().holdSync();
      v.value = (v.value as number) + 1;
    }
    assert.equal(v.value, 2);
  });

  test('the element is also a tensor over the same memory', () => {
    const v = mp.Value('d', 1.25);
    assert.equal(v.tensor.isShared(), true);
    assert.deepEqual(v.tensor.shape, []);
    v.tensor.fill(4);
    assert.equal(v.value, 4);
  });

  test('bad input is coded, and a bad initial value makes nothing', () => {
    throwsCoded(() => mp.Value('x' as mp.Typecode, 0), mp.InvalidDtypeError, 'ERR_TP_INVALID_DTYPE');
    throwsCoded(() => mp.Value('u' as mp.Typecode, 0), mp.InvalidDtypeError, 'ERR_TP_INVALID_DTYPE');
    throwsCoded(() => mp.Value('i', 'one' as never), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => mp.Value('q', 1.5), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => mp.Value('i', 0, { lock: 'yes' as never }), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    const v = mp.Value('i', 3);
    throwsCoded(() => (v.value = {} as never), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    assert.equal(v.value, 3);
  });
});

describe('Array', () => {
  test('from a size or from data; get/set with negative indices; slices and iteration', () => {
    const a = mp.Array('i', 4);
    assert.equal(a.length, 4);
    assert.deepEqual(a.toArray(), [0, 0, 0, 0]);
    const d = mp.Array('d', [1, 2, 3]);
    d.set(-1, 9);
    assert.equal(d.get(-1), 9);
    assert.deepEqual(d.slice(1), [2, 9]);
    assert.deepEqual(d.slice(-2, -1), [2]);
    assert.deepEqual([...d], [1, 2, 9]);
    d.assign([7, 8], 1);
    assert.deepEqual(d.toArray(), [1, 7, 8]);
    assert.deepEqual(mp.Array('B', new Uint8Array([5, 6])).toArray(), [5, 6]);
    assert.deepEqual(mp.Array('q', [1n, 2n]).toArray(), [1n, 2n]);
    assert.equal(mp.Array('f', 0).length, 0);
  });

  test('its memory is a tensor without a copy, both ways', () => {
    const a = mp.Array('f', [1, 2, 3]);
    const t = a.tensor;
    assert.equal(t.dtype, 'float32');
    assert.deepEqual(t.shape, [3]);
    t.set([0], 10);
    assert.equal(a.get(0), 10);
    a.set(2, 30);
    assert.deepEqual(t.toArray(), [10, 2, 30]);
    assert.equal(t.storage, a.tensor.storage);
  });

  test('bad input is coded', () => {
    for (const bad of [-1, 1.5, NaN, 2 ** 31]) throwsCoded(() => mp.Array('i', bad), mp.InvalidCountError, 'ERR_TP_INVALID_COUNT');
    throwsCoded(() => mp.Array('i', {} as never), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => mp.Array('zz' as mp.Typecode, 2), mp.InvalidDtypeError, 'ERR_TP_INVALID_DTYPE');
    const a = mp.Array('i', 2);
    throwsCoded(() => a.get(2), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    throwsCoded(() => a.set(-3, 1), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    throwsCoded(() => a.get(0.5), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    throwsCoded(() => a.assign([1, 2, 3]), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    throwsCoded(() => a.assign(['x' as never]), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    assert.deepEqual(a.toArray(), [0, 0]);
  });
});

describe("Typecode 'c': bytes, as Python's c_char", () => {
  test('a Value reads a one-character string; is written from one, from a number 0-255 or one byte', () => {
    const v = mp.Value('c', 'x');
    assert.equal(v.value, 'x');
    assert.equal(v.dtype, 'uint8');
    assert.equal(v.tensor.toArray(), 0x78, 'the byte itself, as a uint8 tensor');
    v.value = 65;
    assert.equal(v.value, 'A');
    v.value = '\xe9';
    assert.equal(v.value, '\xe9', 'Latin-1: the code is the byte');
    assert.equal(v.tensor.toArray(), 0xe9);
    v.value = new Uint8Array([0x7a]) as never;
    assert.equal(v.value, 'z');
    assert.equal(mp.Value('c').value, '\0', "Python's default, b'\\x00'");
    assert.equal(new mp.Value('c', 0x31, { lock: false }).value, '1');
  });

  test('an Array from a string or a length; elements and .value as the other typecodes', () => {
    const a = mp.Array('c', 'hello');
    assert.equal(a.length, 5);
    assert.equal(a.get(0), 'h');
    assert.equal(a.get(-1), 'o');
    assert.deepEqual(a.toArray(), ['h', 'e', 'l', 'l', 'o']);
    assert.deepEqual(a.slice(1, 3), ['e', 'l']);
    assert.equal([...a].join(''), 'hello');
    a.set(0, 'j');
    a.set(1, 0x61);
    assert.equal(a.value, 'jallo');
    a.value = 'hi';
    assert.equal(a.value, 'hi', 'up to the NUL written after it, as Python');
    assert.deepEqual(a.toArray(), ['h', 'i', '\0', 'l', 'o']);
    a.assign(['x', 'y'], 3);
    assert.deepEqual(a.slice(3), ['x', 'y']);
    const z = mp.Array('c', 3);
    assert.deepEqual(z.toArray(), ['\0', '\0', '\0']);
    assert.equal(z.value, '');
    assert.equal(mp.Array('c', new Uint8Array([104, 105])).value, 'hi');
    assert.equal(mp.Array('c', ['o', 107]).value, 'ok');
    assert.deepEqual(mp.Array('c', 'hi').tensor.toArray(), [104, 105]);
  });

  test('anything that is not one byte is refused, and nothing is written', () => {
    const v = mp.Value('c', 'q');
    for (const bad of ['ab', '', '\u0100', 256, -1, 1.5, 97n, true, null, new Uint8Array(2)]) {
      throwsCoded(() => (v.value = bad as never), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    }
    assert.equal(v.value, 'q');
    throwsCoded(() => mp.Value('c', 'too long'), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    const a = mp.Array('c', 'abc');
    throwsCoded(() => a.set(0, 'xy'), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => a.assign(['x', 'yz']), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => (a.value = 'abcd'), mp.IndexOutOfRangeError, 'ERR_TP_INDEX_OUT_OF_RANGE');
    throwsCoded(() => (a.value = 5 as never), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => mp.Array('c', ['\u20ac']), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    assert.equal(a.value, 'abc');
    throwsCoded(() => mp.Array('i', 'abc' as never), mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
    throwsCoded(() => mp.Array('i', 2).value, mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT');
  });

  test("a 'c' Value and Array arrive in a child as bytes, and its writes are seen here", async () => {
    const v = mp.Value('c', 'a');
    const a = mp.Array('c', 'hello');
    await mp.startProcesses(target('shoutChars'), { args: [v, a] });
    assert.equal(v.value, 'A');
    assert.equal(a.value, 'HELLO');
  });
});

describe('Value and Array across processes', () => {
  for (const strategy of ['file_descriptor', 'file_system'] as const) {
    test(`children add under a Value's own lock (${strategy}); an Array arrives as the same memory`, async () => {
      mp.setSharingStrategy(strategy);
      try {
        const v = mp.Value('i', 0);
        await mp.startProcesses(target('countValue'), { args: [v, 1000], nprocs: 2 });
        assert.equal(v.value, 2000);
        const record = mp.full([2, 3], -1, { dtype: 'int32', shared: true });
        const arrived = mp.Array('i', 2);
        await mp.startProcesses(target('barrierRounds'), { args: [new mp.Barrier(2), record, arrived, 3], nprocs: 2 });
        assert.deepEqual(arrived.toArray(), [3, 3], 'what the children wrote into the Array is here');
        record.release();
      } finally {
        mp.setSharingStrategy('file_descriptor');
      }
    });
  }
});
