// The transport on its own: values through a socketpair in one process, what is refused and
// that refusing takes nothing, and random bytes fed to the frame decoder.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import * as mp from '../../src/index.js';
import { addon } from '../../src/native/index.js';
import { segmentCache } from '../../src/sharing/index.js';
import { encodeMessage, decodeMessage, MAX_FRAME, MAX_FDS, INLINE_MAX } from '../../src/transport/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { throwsCoded } from '../helpers/errors.js';
import { KIND_PLAIN, KIND_VALUE } from '../../src/transport/wire.js';
import { segmentOf } from '../helpers/segments.js';

checkLeaks();

const buf = new Uint8Array(MAX_FRAME);
const fdsOut = new Int32Array(MAX_FDS + 1);

/** Sends `value` through a fresh socketpair and decodes what arrives. */
function roundTrip(value: unknown): unknown {
  const [a, b] = addon.socketpair();
  try {
    const f = encodeMessage(value);
    assert.ok(addon.send(a, f.bytes, f.fds) > 0);
    const n = addon.recv(b, buf, fdsOut);
    return decodeMessage(buf.subarray(0, n), Array.from(fdsOut.subarray(1, 1 + fdsOut[0]!)));
  } finally {
    addon.close(a);
    addon.close(b);
  }
}

/** A small deterministic PRNG (mulberry32): failures are reproducible from the seed. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('values', () => {
  test('structured-clone values with tensors anywhere inside', () => {
    const t = mp.tensor([1, 2, 3, 4]);
    const value = {
      n: 1,
      s: 'é',
      b: true,
      u: undefined,
      nul: null,
      big: 2n ** 70n,
      d: new Date(5),
      re: /x/g,
      arr: [1, [2, [3]]],
      map: new Map<unknown, unknown>([['k', t]]),
      set: new Set([1, 'a']),
      f64: new Float64Array([1.5, 2.5]),
      buf: Buffer.from('hi'),
      err: new RangeError('boom'),
      nested: { deep: { t, view: t.narrow(0, 1, 2) } },
    };
    const got = roundTrip(value) as typeof value;
    assert.equal(got.n, 1);
    assert.equal(got.s, 'é');
    assert.equal(got.big, 2n ** 70n);
    assert.equal(got.d.getTime(), 5);
    assert.deepEqual(got.arr, [1, [2, [3]]]);
    assert.deepEqual([...got.set], [1, 'a']);
    assert.deepEqual([...got.f64], [1.5, 2.5]);
    assert.deepEqual([...got.buf], [...Buffer.from('hi')]);
    assert.ok(got.err instanceof RangeError);
    const gt = got.map.get('k') as mp.Tensor;
    assert.ok(gt instanceof mp.Tensor);
    assert.equal(gt, got.nested.deep.t, 'one tensor met twice arrives as one object');
    assert.equal(got.nested.deep.view.storage, gt.storage, 'views of one storage arrive over one storage');
    assert.deepEqual(got.nested.deep.view.toArray(), [2, 3]);
    assert.equal(gt.storage, t.storage, 'a process gets back its own storage');
    assert.equal(value.map.get('k'), t, 'the sent value is not modified');
    t.release();
  });

  test('arrays copied on the way to a tensor keep their holes and extra properties (as structured clone)', () => {
    const t = mp.full([2], 5, { shared: true });
    const holey = [1, , 3]; // eslint-disable-line no-sparse-arrays
    const tagged = Object.assign([t, 2], { label: 'batch-7', inner: t, after: 'kept too', '4294967295': 'not an index' });
    const trailing = [t, 1, , ,]; // eslint-disable-line no-sparse-arrays
    const boxed = Object(10n) as object;
    const got = roundTrip({ holey, tagged, trailing, boxed, t }) as any;
    assert.equal(1 in got.holey, false, 'a hole stays a hole');
    assert.equal(got.holey.length, 3);
    assert.equal(got.tagged.label, 'batch-7');
    assert.equal(got.tagged.after, 'kept too');
    assert.equal(got.tagged['4294967295'], 'not an index');
    const late = Object.assign([1, 2], { keep: 'kept', t }); // an extra key before the one that holds a tensor
    assert.equal((roundTrip({ late }) as any).late.keep, 'kept');
    // A subclass is copied as a plain array, never through its own constructor (Symbol.species).
    class NoSpecies extends Array {
      constructor(...xs: unknown[]) {
        if (xs.length === 1 && typeof xs[0] === 'number') throw new TypeError('built through Symbol.species');
        super(...(xs as number[]));
      }
    }
    const sub = (roundTrip({ sub: new NoSpecies(t, 1) }) as any).sub;
    assert.equal(Object.getPrototypeOf(sub), Array.prototype);
    assert.ok(sub[0] instanceof mp.Tensor);
    assert.equal(sub[1], 1);
    // A cycle inside an error's cause, in a message copied for its own cycle: it travels as it is.
    const inner: any = { note: 'c' };
    inner.self = inner;
    const withCycle: any = { t, err: new Error('x', { cause: inner }) };
    withCycle.me = withCycle;
    const gotCycle = roundTrip(withCycle) as any;
    assert.equal(gotCycle.err.cause.self, gotCycle.err.cause);
    assert.equal(gotCycle.me, gotCycle);
    // An object both in a cause and elsewhere in such a message would arrive as two objects
    // (the cause is written as it is, the rest is a copy): refused, naming where.
    const meta: any = { step: 7 };
    const shared: any = { meta, err: new Error('x', { cause: meta }), t };
    shared.self = shared;
    throwsCoded(() => encodeMessage(shared), mp.NotTransferableError, 'ERR_TP_NOT_TRANSFERABLE');
    // A sparse array: its elements are visited (and copied), not every index up to its length.
    const sparse: unknown[] = [1];
    sparse[2 ** 28] = t;
    const gotSparse = (roundTrip({ sparse }) as any).sparse;
    assert.equal(gotSparse.length, 2 ** 28 + 1);
    assert.equal(gotSparse[0], 1);
    assert.equal(1 in gotSparse, false);
    assert.ok(gotSparse[2 ** 28] instanceof mp.Tensor);
    const long = Object.assign(
      Array.from({ length: 100 }, (_, i) => i),
      { label: 'long', t },
    ); // the addon lists its keys
    const gotLong = (roundTrip({ long }) as any).long;
    assert.equal(gotLong.label, 'long');
    assert.equal(gotLong[99], 99);
    assert.ok(got.tagged.inner instanceof mp.Tensor, 'a tensor under an extra property is a tensor');
    assert.equal(got.tagged.inner.storage, got.tagged[0].storage);
    assert.equal(got.trailing.length, 4);
    assert.equal(2 in got.trailing, false);
    assert.equal(Object.prototype.toString.call(got.boxed), '[object BigInt]');
    assert.equal(got.boxed.valueOf(), 10n);
    // Every container copied (a cycle), tensor-free ones included.
    const cyclic: any = { t, list: Object.assign([1, , 3], { tag: 'T' }) }; // eslint-disable-line no-sparse-arrays
    cyclic.self = cyclic;
    const back = roundTrip(cyclic) as any;
    assert.equal(1 in back.list, false);
    assert.equal(back.list.tag, 'T');
    assert.equal(back.self, back);
    // Back in the process that sent it, a storage is the very same one: one release.
    assert.equal(back.t.storage, t.storage);
    t.release();
  });

  test('cycles through containers that hold tensors', () => {
    const t = mp.full([2], 3);
    const a: Record<string, unknown> = { t };
    a.self = a;
    a.list = [a, t];
    const got = roundTrip(a) as Record<string, unknown>;
    assert.equal(got.self, got);
    assert.equal((got.list as unknown[])[0], got);
    assert.equal((got.list as unknown[])[1], got.t);
    t.release();
  });

  test('a lone tensor (the compact frame) keeps dtype, shape, stride and offset', () => {
    for (const dtype of mp.DTYPES) {
      const base = mp.zeros([3, 4], { dtype });
      const v = base.transpose(0, 1).narrow(0, 1, 2);
      const got = roundTrip(v) as mp.Tensor;
      assert.equal(got.dtype, dtype);
      assert.deepEqual(got.shape, v.shape);
      assert.deepEqual(got.stride, v.stride);
      assert.equal(got.offset, v.offset);
      base.release();
    }
  });

  test('empty tensors (torch test_empty_tensor_sharing), both strategies', () => {
    for (const strategy of ['file_descriptor', 'file_system'] as const) {
      mp.setSharingStrategy(strategy);
      const e = mp.tensor([]);
      const got = roundTrip(e) as mp.Tensor;
      assert.deepEqual(got.shape, [0]);
      assert.deepEqual(got.toArray(), []);
      got[Symbol.dispose]();
      e[Symbol.dispose]();
    }
    mp.setSharingStrategy('file_descriptor');
  });

  test('is_shared (torch test_is_shared): put moves a tensor into shared memory once', () => {
    const t = mp.tensor([1, 2]);
    assert.equal(t.isShared(), false);
    const got = roundTrip(t) as mp.Tensor;
    assert.equal(t.isShared(), true);
    assert.equal(got.storage, t.storage);
    t.release();
  });

  test(`a message larger than a datagram (${INLINE_MAX} bytes) travels whole`, () => {
    const t = mp.full([8], 2);
    const big = { t, data: new Float64Array(200_000).fill(1.25), text: 'x'.repeat(300_000) };
    const got = roundTrip(big) as typeof big;
    assert.equal(got.data.length, 200_000);
    assert.equal(got.data[199_999], 1.25);
    assert.equal(got.text.length, 300_000);
    assert.equal(got.t.storage, t.storage);
    t.release();
  });
});

describe('refused values', () => {
  const cases: [string, () => unknown, string][] = [
    ['a function', () => ({ batch: { meta: { fn: () => 1 } } }), 'batch.meta.fn'],
    ['a symbol', () => [1, Symbol('s')], '[1]'],
    ['a WeakMap', () => ({ w: new WeakMap() }), 'w'],
    ['a Promise', () => ({ p: Promise.resolve() }), 'p'],
    ['a SharedArrayBuffer', () => ({ sab: new SharedArrayBuffer(8) }), 'sab'],
    ['a Map value', () => new Map([['k', () => 1]]), '.get("k")'],
    ['a key that needs quoting', () => ({ 'a b': () => 1 }), '["a b"]'],
    ['the message itself', () => () => 1, '(message)'],
    // Checked before anything reads the object: reading obj.constructor would run the traps.
    [
      'a Proxy whose traps throw',
      () => ({
        p: new Proxy(
          {},
          {
            get: () => {
              throw new Error('trap ran');
            },
          },
        ),
      }),
      'p',
    ],
    [
      'a revoked Proxy',
      () => {
        const r = Proxy.revocable({}, {});
        r.revoke();
        return { p: r.proxy };
      },
      'p',
    ],
    ['a Symbol object', () => ({ s: Object(Symbol('s')) }), 's'],
    // V8 writes an error's cause itself: a tensor there would arrive as a plain object.
    ["a tensor in an Error's cause", () => ({ err: new Error('failed', { cause: mp.zeros([1]) }) }), 'err.cause'],
    // Met first outside the cause (copied there), then inside it.
    [
      "an object holding a tensor, met again in an Error's cause",
      () => {
        const box = { t: mp.zeros([1]) };
        return { box, e: new Error('x', { cause: box }) };
      },
      'e.cause',
    ],
    // A cause that leads back to a container holding a tensor (V8 would write the tensor as a plain object).
    [
      "a cycle through an Error's cause to a tensor",
      () => {
        const box: any = { t: mp.zeros([1]) };
        box.e = new Error('x', { cause: box });
        return box;
      },
      '(message)',
    ],
  ];
  for (const [what, make, path] of cases) {
    test(`${what}: NotTransferableError naming ${path}`, () => {
      assert.throws(
        () => encodeMessage(make()),
        (e: any) => {
          assert.ok(e instanceof mp.NotTransferableError);
          assert.ok(e instanceof TypeError);
          assert.equal(e.code, 'ERR_TP_NOT_TRANSFERABLE');
          assert.equal(e.path.replace(/^\./, ''), path.replace(/^\./, ''));
          return true;
        },
      );
    });
  }

  test('a refused value takes no reference on the tensors beside it', () => {
    const t = mp.full([4], 1, { shared: true });
    const segment = segmentOf(t);
    const before = segment.refcount();
    assert.throws(() => encodeMessage({ t, bad: () => 1 }), { code: 'ERR_TP_NOT_TRANSFERABLE' });
    assert.equal(segment.refcount(), before);
    // And a frame abandoned after encoding gives its reference back.
    encodeMessage({ t }).abandon();
    assert.equal(segment.refcount(), before);
    t.release();
  });

  test('more descriptors than one message carries: TooManyDescriptorsError, nothing taken', () => {
    // Above PACK_BYTES, so that each is a segment (and a descriptor) of its own (NOTE [Packed small storages]).
    const ts = Array.from({ length: MAX_FDS }, () => mp.zeros([256], { shared: true }));
    assert.throws(
      () => encodeMessage(ts),
      (e: any) => e instanceof mp.TooManyDescriptorsError && e.code === 'ERR_TP_TOO_MANY_DESCRIPTORS',
    );
    for (const t of ts) t.release();
  });
});

describe('plain frames (NOTE [Plain frames])', () => {
  const kindOf = (value: unknown): number => {
    const f = encodeMessage(value);
    const kind = f.bytes[0]!;
    f.abandon();
    return kind;
  };

  test('plain trees take the PLAIN path and arrive as structured clone makes them', () => {
    const protoKey = JSON.parse('{"__proto__": {"own": 1}}');
    const nullProto = Object.assign(Object.create(null), { a: 1 });
    const values: unknown[] = [
      0,
      -0,
      1,
      -1,
      2 ** 31,
      -(2 ** 31),
      2 ** 53,
      0.1,
      NaN,
      Infinity,
      -Infinity,
      true,
      false,
      null,
      undefined,
      '',
      'ascii',
      'é€😀',
      'lone \ud800 and \udc00 surrogates',
      'x'.repeat(5000),
      [],
      [undefined, null, [[]], {}],
      { b: 1, a: 2, 10: 'ten', 2: 'two', nested: { u: undefined } },
      protoKey,
      nullProto,
      Array.from({ length: 1000 }, (_, i) => i * 0.5),
    ];
    for (const v of values) {
      assert.equal(kindOf(v), KIND_PLAIN, `${inspect(v).slice(0, 40)} should take the PLAIN path`);
      const got = roundTrip(v);
      assert.deepStrictEqual(got, structuredClone(v));
      if (typeof v === 'number') assert.ok(Object.is(got, v), `${v} keeps its identity (-0, NaN)`);
    }
    const gotProto = roundTrip(protoKey) as Record<string, unknown>;
    assert.ok(Object.hasOwn(gotProto, '__proto__'), '__proto__ arrives as an own property');
    assert.equal(Object.getPrototypeOf(gotProto), Object.prototype);
    assert.deepEqual(
      Object.keys(roundTrip({ b: 1, a: 2, 10: 'x', 2: 'y' }) as object),
      ['2', '10', 'b', 'a'],
      'key order as structured clone',
    );
  });

  test('random trees arrive as structured clone makes them, by whichever path (property, 2000 cases)', () => {
    const rand = prng(0x91a1);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const strings = ['', 'a', 'key', 'é', '😀', '\ud800', 'a b', '__proto__', '0', '10', 'toString'];
    const leaf = (): unknown =>
      pick([
        () => Math.floor(rand() * 2 ** 32) - 2 ** 31,
        () => rand() * 1e6,
        () => -0,
        () => NaN,
        () => Infinity,
        () => pick(strings),
        () => rand() < 0.5,
        () => null,
        () => undefined,
      ])();
    let shared: object | null = null;
    const tree = (depth: number): unknown => {
      const r = rand();
      if (depth > 4 || r < 0.35) return leaf();
      if (r < 0.4 && shared !== null) return shared; // met twice: structured clone keeps the sharing
      if (r < 0.7) {
        const a = Array.from({ length: Math.floor(rand() * 5) }, () => tree(depth + 1));
        if (rand() < 0.05 && a.length > 1) delete a[0]; // a hole
        if (rand() < 0.05) Object.assign(a, { extra: 1 });
        if (rand() < 0.2) shared = a;
        return a;
      }
      const o: Record<string, unknown> = rand() < 0.05 ? Object.create(null) : {};
      for (let i = Math.floor(rand() * 5); i > 0; i--) {
        const k = pick(strings);
        if (k === '__proto__')
          Object.defineProperty(o, k, { value: tree(depth + 1), enumerable: true, writable: true, configurable: true });
        else o[k] = tree(depth + 1);
      }
      if (rand() < 0.2) shared = o;
      return o;
    };
    const kinds = new Map<number, number>();
    for (let i = 0; i < 2000; i++) {
      shared = null;
      const v = tree(0);
      const f = encodeMessage(v);
      kinds.set(f.bytes[0]!, (kinds.get(f.bytes[0]!) ?? 0) + 1);
      const got = decodeMessage(f.bytes.slice(), []);
      assert.deepStrictEqual(got, structuredClone(v), `case ${i}: ${inspect(v, { depth: 6 })}`);
    }
    // Both paths were exercised.
    assert.ok((kinds.get(KIND_PLAIN) ?? 0) > 100 && (kinds.get(KIND_VALUE) ?? 0) > 20, inspect(kinds));
  });

  test('tensors inside: shared memory, and two views of one storage arrive over one storage', () => {
    for (const strategy of ['file_descriptor', 'file_system'] as const) {
      mp.setSharingStrategy(strategy);
      try {
        const t = mp.tensor([1, 2, 3, 4, 5, 6]).view(2, 3);
        const value = { x: t, row: t.select(0, 1), label: 7, pair: [t.narrow(1, 1, 2), 'tag'] };
        assert.equal(kindOf(value), KIND_PLAIN);
        const got = roundTrip(value) as { x: mp.Tensor; row: mp.Tensor; label: number; pair: [mp.Tensor, string] };
        assert.ok(t.isShared(), 'the tensor was moved to shared memory to travel');
        assert.deepEqual(got.x.toArray(), [
          [1, 2, 3],
          [4, 5, 6],
        ]);
        assert.deepEqual(got.row.toArray(), [4, 5, 6]);
        assert.deepEqual(got.pair[0].toArray(), [
          [2, 3],
          [5, 6],
        ]);
        assert.equal(got.label, 7);
        assert.equal(got.x.storage, got.row.storage, 'one storage');
        assert.equal(got.x.storage, t.storage, 'sent back to its own process: the same storage');
        got.x.set([0, 0], 42);
        assert.equal(t.get(0, 0), 42, 'the same memory');
        t.release();
      } finally {
        mp.setSharingStrategy('file_descriptor');
      }
    }
  });

  test('what PLAIN does not represent exactly goes the VALUE way, and arrives right', () => {
    const shared = { s: 1 };
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const sparse = [1, , 3]; // eslint-disable-line no-sparse-arrays
    const extra = Object.assign([1, 2], { note: 'x' });
    const holeAndExtra = Object.assign([1, , 3], { note: 'x' }); // eslint-disable-line no-sparse-arrays
    let deep: unknown = 1;
    for (let i = 0; i < 40; i++) deep = [deep];
    class Point {
      constructor(readonly x: number) {}
    }
    const t = mp.zeros([2], { shared: true });
    const cases: [string, unknown, (got: any) => void][] = [
      ['a shared object', [shared, shared], (g) => assert.equal(g[0], g[1])],
      ['a cycle', cyclic, (g) => assert.equal(g.self, g)],
      ['one tensor twice', [t, t], (g) => assert.equal(g[0], g[1])],
      ['a sparse array', sparse, (g) => assert.ok(!(1 in g) && g.length === 3)],
      ['an array with a property', extra, (g) => assert.equal(g.note, 'x')],
      ['a hole and a property', holeAndExtra, (g) => assert.ok(!(1 in g) && g.note === 'x')],
      ['a bigint', [1n], (g) => assert.equal(g[0], 1n)],
      ['a Date', { d: new Date(3) }, (g) => assert.equal(g.d.getTime(), 3)],
      ['a Map', new Map([[1, 2]]), (g) => assert.equal(g.get(1), 2)],
      ['a typed array', [new Int16Array([5])], (g) => assert.equal(g[0][0], 5)],
      ['a class instance', new Point(2), (g) => assert.deepEqual(g, { x: 2 })],
      ['deep nesting', deep, (g) => assert.ok(Array.isArray(g))],
    ];
    for (const [what, value, check] of cases) {
      assert.equal(kindOf(value), KIND_VALUE, what);
      check(roundTrip(value));
    }
    t.release();
  });

  test('exactness: what structured clone would send differently goes the VALUE way', () => {
    const deleting = {
      get a() {
        delete (this as { b?: number }).b;
        return 1;
      },
      b: 2,
    };
    assert.equal(kindOf(deleting), KIND_VALUE, 'a getter deleting a later property');
    const hidden = Object.assign([1, 2, 3], { x: 9 });
    Object.defineProperty(hidden, 1, { enumerable: false });
    assert.equal(kindOf(hidden), KIND_VALUE, 'a hidden element beside an extra property');
    const args = (function (..._: unknown[]) {
      return arguments; // eslint-disable-line prefer-rest-params
    })(1, 2);
    // An arguments object is not plain: the VALUE path refuses it, as structured clone does.
    throwsCoded(() => encodeMessage(args).abandon(), mp.NotTransferableError, 'ERR_TP_NOT_TRANSFERABLE');
    const looksLikeArray = Object.create(Array.prototype) as unknown[];
    assert.equal(kindOf(looksLikeArray), KIND_VALUE, 'an object with Array.prototype is not an array');
    const nullArray = Object.setPrototypeOf([1, 2], null) as unknown;
    assert.equal(kindOf(nullArray), KIND_VALUE, 'an array without its prototype');
    assert.deepStrictEqual(roundTrip(nullArray), structuredClone(nullArray));
  });

  test('a getter that sends a message while its own message is written: both arrive whole', () => {
    const sent: { inner: ReturnType<typeof encodeMessage> | null } = { inner: null };
    const value = {
      a: 1,
      get b() {
        sent.inner = encodeMessage({ inner: [1, 2, 3] });
        return 2;
      },
      c: 'three',
    };
    const outer = encodeMessage(value);
    assert.equal(outer.bytes[0], KIND_PLAIN);
    assert.deepEqual(decodeMessage(outer.bytes.slice(), []), { a: 1, b: 2, c: 'three' });
    // The inner message, written while the outer one was, went the VALUE way, and is whole too.
    assert.equal(sent.inner!.bytes[0], KIND_VALUE);
    assert.deepEqual(decodeMessage(sent.inner!.bytes.slice(), []), { inner: [1, 2, 3] });
  });

  test('views of one storage travel with one descriptor and one reference', () => {
    const t = mp.zeros([4, 2], { shared: true });
    const segment = segmentOf(t);
    const before = segment.refcount();
    const f = encodeMessage({ rows: [t.select(0, 0), t.select(0, 1), t.select(0, 2)], all: t.view(8) });
    assert.equal(f.bytes[0], KIND_PLAIN);
    assert.equal(f.fds.length, 1);
    assert.equal(segment.refcount(), before + 1);
    f.abandon();
    f.abandon(); // twice: once only
    assert.equal(segment.refcount(), before);
    t.release();
  });

  test('a storage that fails to arrive leaves no reference of the others in flight', () => {
    mp.setSharingStrategy('file_system');
    try {
      // Segments of their own (above PACK_BYTES): pieces of one slab would share their fate.
      const gone = mp.full([256], 1, { shared: true });
      const kept = mp.full([256], 2, { shared: true });
      const keptSegment = segmentOf(kept);
      const before = keptSegment.refcount();
      const f = encodeMessage([gone, kept, 'x']);
      assert.equal(f.bytes[0], KIND_PLAIN);
      const bytes = f.bytes.slice();
      assert.equal(keptSegment.refcount(), before + 1, 'one reference in flight for kept');
      const name = segmentOf(gone).name;
      gone.release();
      mp.emptyCache();
      try {
        addon.shmUnlink(name!);
      } catch {
        // already gone
      }
      throwsCoded(() => decodeMessage(bytes, []), mp.SegmentGoneError, 'ERR_TP_SEGMENT_GONE');
      assert.equal(keptSegment.refcount(), before, 'the storage after the failed one was taken in all the same');
      kept.release();
    } finally {
      mp.setSharingStrategy('file_descriptor');
    }
  });

  test('a released tensor is refused before any segment is made for it', () => {
    const t = mp.tensor([1, 2, 3]); // not shared: sending it would move it into shared memory
    t.release();
    const created = segmentCache.created;
    throwsCoded(() => encodeMessage({ t }), mp.ReleasedError, 'ERR_TP_RELEASED');
    throwsCoded(() => encodeMessage(t), mp.ReleasedError, 'ERR_TP_RELEASED');
    assert.equal(segmentCache.created, created);
  });

  test('malformed PLAIN frames are FrameDecodeErrors, and their descriptors are closed', () => {
    const good = (): Uint8Array => encodeMessage([1, 'two', { three: 3 }]).bytes.slice();
    const deep = (): Uint8Array => {
      // 40 nested one-element arrays around undefined: past the decoder's depth limit.
      const tree = [...Array.from({ length: 40 }, () => [7, 1, 0, 0, 0]).flat(), 0];
      const b = new Uint8Array(6 + tree.length + 2);
      b.set([KIND_PLAIN, 1]);
      new DataView(b.buffer).setUint32(2, 6 + tree.length, true);
      b.set(tree, 6);
      return b;
    };
    const cases: [string, () => Uint8Array][] = [
      ['bytes after the table', () => Uint8Array.from([...good(), 0])],
      [
        'a table offset past the end',
        () => {
          const b = good();
          new DataView(b.buffer).setUint32(2, b.length + 10, true);
          return b;
        },
      ],
      [
        'an unknown tag',
        () => {
          const b = good();
          b[6] = 200;
          return b;
        },
      ],
      ['nesting too deep', deep],
    ];
    for (const [what, make] of cases) {
      const fd = addon.memfdCreate('r', 4096);
      throwsCoded(() => decodeMessage(make(), [fd]), mp.FrameDecodeError, 'ERR_TP_BAD_FRAME');
      assert.throws(
        () => addon.fstat(fd),
        (e: any) => e.code === 'EBADF',
        `${what}: its descriptor was closed`,
      );
    }
    // A file_descriptor storage whose descriptor did not come with the message.
    const t = mp.zeros([4], { shared: true });
    const f = encodeMessage([t, 1]);
    assert.equal(f.bytes[0], KIND_PLAIN);
    throwsCoded(() => decodeMessage(f.bytes.slice(), []), mp.FrameDecodeError, 'ERR_TP_BAD_FRAME');
    f.abandon(); // nothing was imported: the reference in flight is still the sender's to take back
    t.release();
  });

  test('giving up part-way gives back what the PLAIN encoder took', () => {
    const t = mp.zeros([4], { shared: true });
    const segment = segmentOf(t);
    const before = segment.refcount();
    // The tensor is exported, then the Date makes the encoder give up: the VALUE frame holds one reference, not two.
    const f = encodeMessage({ t, d: new Date(0) });
    assert.equal(f.bytes[0], KIND_VALUE);
    assert.equal(segment.refcount(), before + 1);
    f.abandon();
    assert.equal(segment.refcount(), before);
    // A value the VALUE path refuses: nothing is kept either.
    throwsCoded(() => encodeMessage({ t, f: () => 1 }), mp.NotTransferableError, 'ERR_TP_NOT_TRANSFERABLE');
    assert.equal(segment.refcount(), before);
    t.release();
  });
});

describe('decoding', () => {
  test('a received tensor whose layout does not fit its storage is a FrameDecodeError, not a caller error', () => {
    const t = mp.zeros([2], { shared: true, dtype: 'float64' });
    const f = encodeMessage(t);
    const bytes = f.bytes.slice();
    const fds = Array.from(f.fds, (fd) => addon.dup(fd));
    f.abandon();
    new DataView(bytes.buffer).setFloat64(24, 1 << 20, true); // shape[0]: 1 Mi elements over 16 bytes
    throwsCoded(() => decodeMessage(bytes, fds), mp.FrameDecodeError, 'ERR_TP_BAD_FRAME');
    t.release();
  });

  test('a handle to a vanished segment is a SegmentGoneError', () => {
    mp.setSharingStrategy('file_system');
    try {
      const t = mp.full([4], 1, { shared: true });
      const name = segmentOf(t).name;
      const f = encodeMessage(t);
      const bytes = f.bytes.slice();
      t.release();
      mp.emptyCache();
      try {
        addon.shmUnlink(name!);
      } catch {
        // already gone
      }
      assert.throws(
        () => decodeMessage(bytes, []),
        (e: any) => e instanceof mp.SegmentGoneError && e.code === 'ERR_TP_SEGMENT_GONE',
      );
    } finally {
      mp.setSharingStrategy('file_descriptor');
    }
  });

  test('truncated, unknown and wrong-version frames are FrameDecodeErrors, and their descriptors are closed', () => {
    const fd = addon.memfdCreate('x', 4096);
    for (const bytes of [new Uint8Array(0), Uint8Array.of(1), Uint8Array.of(9, 1), Uint8Array.of(1, 99), Uint8Array.of(2, 1, 0, 1)]) {
      assert.throws(
        () => decodeMessage(bytes, [addon.dup(fd)]),
        (e: any) => e instanceof mp.FrameDecodeError && e.code === 'ERR_TP_BAD_FRAME',
      );
    }
    addon.close(fd);
  });

  test('random bytes never crash the decoder (property, 3000 cases)', () => {
    const rand = prng(0x5eed);
    const t = mp.full([3, 2], 1, { shared: true });
    // Each case encodes afresh, so that every decode has the reference in flight it adopts: a
    // frame decoded twice would give back one it never had, and t's count would go below zero.
    const valid = [
      () => encodeMessage(t).bytes.slice(),
      () => encodeMessage({ a: [t, 'x'], m: new Map([[1, t.select(0, 1)]]) }).bytes.slice(),
      () => encodeMessage([1, 'two', { three: 3 }]).bytes.slice(),
      () => encodeMessage([t, { x: t.select(0, 1), s: 'é\ud800' }, -0, 2.5, null]).bytes.slice(), // PLAIN, with tensors
    ];
    assert.equal(valid[3]!()[0], KIND_PLAIN);
    let decoded = 0;
    let refused = 0;
    for (let i = 0; i < 3000; i++) {
      let bytes: Uint8Array;
      const mode = i % 3;
      if (mode === 0) {
        bytes = new Uint8Array(Math.floor(rand() * 300));
        for (let k = 0; k < bytes.length; k++) bytes[k] = Math.floor(rand() * 256);
        if (rand() < 0.5 && bytes.length > 2) {
          bytes[0] = 1 + Math.floor(rand() * 4);
          bytes[1] = 1;
        }
      } else {
        // A valid frame with a few bytes flipped or cut short.
        bytes = valid[Math.floor(rand() * valid.length)]!();
        for (let k = 0, n = 1 + Math.floor(rand() * 4); k < n; k++)
          bytes[2 + Math.floor(rand() * (bytes.length - 2))] = Math.floor(rand() * 256);
        if (mode === 2) bytes = bytes.subarray(0, Math.floor(rand() * bytes.length));
      }
      const fds = rand() < 0.5 ? [addon.memfdCreate('r', 4096)] : [];
      try {
        decodeMessage(bytes, fds); // what decodes is over t's storage (this process's own): t.release() covers it
        decoded++;
      } catch (e) {
        assert.ok(mp.isTensorprocError(e), `case ${i}: a non-coded ${(e as Error)?.name}: ${(e as Error)?.message}`);
        refused++;
      }
    }
    // Both outcomes happened: the cases reach the decoder's checks and get past them.
    assert.ok(refused > 0 && decoded > 0, `${decoded} decoded, ${refused} refused`);
    const segment = segmentOf(t);
    assert.ok(segment.refcount() >= 1, `t's segment still counts this process's hold (${segment.refcount()})`);
    t.release();
  });
});
