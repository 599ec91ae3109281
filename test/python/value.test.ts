// VALUE and SPILL frames read in Python (python/tensorproc/_v8.py, _value.py; docs/protocol.md,
// "The V8 subset"): Node puts each kind of value its serializer writes for plain data, and the
// Python peer answers what it got with its types named; tensors inside a VALUE frame arrive
// over the same memory; a message large enough to spill arrives whole and its spill segment
// goes back; what is outside the subset is a coded error naming the tag, and pins nothing.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { segmentCache } from '../../src/sharing/index.js';
import { INLINE_MAX } from '../../src/transport/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { noPython, startPeer, type Peer } from './python-peer.js';

checkLeaks();

const int = (v: number | bigint) => ({ t: 'int', v: String(v) });
const float = (v: number) => ({ t: 'float', v: Number.isNaN(v) ? 'nan' : Number.isInteger(v) ? `${v}.0` : String(v) });
const dict = (v: Record<string, unknown>) => ({ t: 'dict', v });
/** An ndarray as the peer names it: its items as Python's str() writes them. */
const nd = (dtype: string, v: (number | bigint | string)[], shared = false) => ({ t: 'ndarray', dtype, v: v.map(String), shared });

/** Segments of this process another process still holds. */
function busy(): number {
  return segmentCache.busySegments().filter((s) => s.refcount() > 1).length;
}

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  describe(strategy, { skip: noPython }, () => {
    let peer: Peer;
    after(async () => {
      await peer?.close();
      mp.setSharingStrategy('file_descriptor');
    });

    test('each kind of value V8 writes for plain data arrives equal', async () => {
      mp.setSharingStrategy(strategy);
      peer = startPeer(strategy);
      const buf = new ArrayBuffer(12);
      new Uint8Array(buf).set([1, 2, 3, 4, 5, 0, 0, 0, 6, 0, 0, 0]);
      const shared = { a: 1 };
      const sparse: number[] = [];
      sparse[4] = 7;
      const value = {
        // V8 writes an array of small integers as Smis (int), one holding any other number as doubles
        ints: [0, -1, 1000, -(2 ** 30)],
        numbers: [2 ** 31, 4294967296, 1.5, NaN, -Infinity],
        oddballs: [null, undefined, true, false],
        strings: ['', 'latin1 é', 'two-byte € 😀'],
        bigints: [0n, -1n, 10n ** 30n, -(2n ** 64n)],
        holes: [1, , 3], // eslint-disable-line no-sparse-arrays
        sparse,
        map: new Map<unknown, unknown>([
          [1, 'one'],
          ['k', { v: 2 }],
        ]),
        set: new Set<unknown>([1, 'a', 3n]),
        date: new Date(1234567890123),
        typed: [new Float32Array([1, 2.5]), new Int16Array([-3]), new BigUint64Array([2n ** 64n - 1n]), new Uint8ClampedArray([255])],
        views: [new Uint8Array(buf, 0, 4), new Int32Array(buf, 4, 2)],
        buffer: new Uint8Array([9, 8]).buffer,
        wrappers: [Object(3), Object('s'), Object(false)],
        shared: [shared, shared],
      };
      const got = (await peer.ask({ op: 'tagged', value })) as { v: { set: { v: unknown[] } } };
      got.v.set.v = sorted(got.v.set.v);
      assert.deepEqual(
        got,
        dict({
          ints: [int(0), int(-1), int(1000), int(-(2 ** 30))],
          numbers: [float(2 ** 31), float(4294967296), float(1.5), float(NaN), { t: 'float', v: '-inf' }],
          oddballs: [null, null, true, false],
          strings: ['', 'latin1 é', 'two-byte € 😀'],
          bigints: [int(0n), int(-1n), int(10n ** 30n), int(-(2n ** 64n))],
          holes: [int(1), null, int(3)],
          sparse: [null, null, null, null, int(7)],
          map: {
            t: 'map',
            v: [
              [int(1), 'one'],
              ['k', dict({ v: int(2) })],
            ],
          },
          set: { t: 'set', v: sorted(['a', int(1), int(3n)]) },
          date: { t: 'date', v: '2009-02-13T23:31:30.123000+00:00' },
          typed: [nd('float32', ['1.0', '2.5']), nd('int16', [-3]), nd('uint64', [2n ** 64n - 1n]), nd('uint8', [255])],
          views: [nd('uint8', [1, 2, 3, 4]), nd('int32', [5, 6])],
          buffer: { t: 'bytes', v: [9, 8] },
          wrappers: [float(3), 's', false],
          shared: [dict({ a: int(1) }), dict({ a: int(1) })],
        }),
      );
      assert.equal(await peer.ask({ op: 'same', value: [shared, shared] }), true, 'an object met twice is one object in Python');
    });

    test('tensors inside a VALUE frame arrive over the same memory, and go back', async () => {
      const t = mp.zeros([2, 3], { dtype: 'float64', shared: true });
      const m = new Map<string, unknown>([['t', t.narrow(1, 1, 2)]]);
      assert.equal(await peer.ask({ op: 'fill', t: t.narrow(1, 1, 2), v: 5, m }), 'filled');
      assert.deepEqual(t.toArray(), [
        [0, 5, 5],
        [0, 5, 5],
      ]);
      const got = await peer.ask({ op: 'tagged', value: new Map([[1, t.select(0, 1)]]) });
      assert.deepEqual(got, { t: 'map', v: [[int(1), nd('float64', ['0.0', '5.0', '5.0'], true)]] });
      t.release();
      assert.equal(busy(), 0, 'Python let go of the tensors of a VALUE frame');
    });

    test('a message large enough to spill arrives whole, and its segment goes back', async () => {
      const big = new Map<number, string>();
      for (let i = 0; i < 5000; i++) big.set(i, `value ${i} ${'x'.repeat(20)}`);
      const t = mp.full([4], 2, { dtype: 'int32', shared: true });
      const value = { big, t };
      const got = await peer.ask({ op: 'big', value });
      assert.deepEqual(got, { n: 5000, last: [4999, `value 4999 ${'x'.repeat(20)}`], t: nd('int32', [2, 2, 2, 2], true) });
      assert.ok(5000 * 30 > INLINE_MAX, 'the message is over a datagram: it spilled');
      t.release();
      assert.equal(busy(), 0, 'the spill segment and the tensor went back');
    });

    test('what is outside the subset is a coded error naming the tag, and pins nothing', async () => {
      const t = mp.full([8], 1, { dtype: 'float32', shared: true });
      const bad = (await peer.ask({ op: 'tagged', value: [t, /re/g] })) as { error: string; tag: number; message: string };
      assert.equal(bad.error, 'ERR_TP_UNSUPPORTED_VALUE');
      assert.equal(bad.tag, 'R'.charCodeAt(0));
      assert.match(bad.message, /RegExp/);
      const q = new mp.Queue();
      const obj = (await peer.ask({ op: 'tagged', value: [t, q] })) as { error: string; message: string };
      assert.equal(obj.error, 'ERR_TP_UNSUPPORTED_VALUE');
      assert.match(obj.message, /attach the object by its name/);
      q.close();
      t.release();
      assert.equal(busy(), 0, 'the tensors of a refused message are released');
    });
  });
}

/** A Python set's items in an order both sides agree on. */
function sorted(items: unknown[]): unknown[] {
  return items
    .map((x) => JSON.stringify(x))
    .sort()
    .map((x) => JSON.parse(x) as unknown);
}
