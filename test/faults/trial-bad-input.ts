// The bad-input trial of the fault campaign (NOTE [Fault trials] in plan.ts): random arguments
// through the public API, drawn by fast-check from the trial's seed. Each case is built as
// valid or wrong (an option of the wrong type, a size that is not a non-negative integer…),
// and some only as "either" (values the API may take or refuse, huge shapes): a wrong case
// must be refused with a coded error (ERR_TP_*), a valid one must work, no error may be
// uncoded, no call may hang, and a get refused for its options leaves the message for the
// next get (nothing lost), a refused put leaves nothing in the queue and a valid put after it
// arrives, and an accepted put arrives (a put that was lost is a failure, not a refusal). The
// runner checks afterwards that nothing was left behind.
import fc from 'fast-check';
import * as mp from '../../src/index.js';
import type { Trial } from './trial-kit.js';

export const BAD_INPUT_CASES = 300;
/** A call that has not settled by then hangs (every case here completes at once or times out sooner). */
const CALL_MS = 10_000;

type Verdict = 'valid' | 'wrong' | 'either';
/** A check of a case that failed (a message lost or left behind): a failure of its own kind, never a refusal. */
class Broken extends Error {
  constructor(
    readonly kind: string,
    message: string,
  ) {
    super(message);
  }
}

/** The next message of `q`, which must be there: a get that finds none means it was lost. */
async function arrival(q: mp.Queue<unknown>, what: string): Promise<unknown> {
  try {
    return await q.get({ timeout: CALL_MS / 2 });
  } catch (e) {
    if (e instanceof mp.QueueEmptyError)
      throw new Broken('lost', `${what} never arrived (a get of ${CALL_MS / 2} ms found the queue empty)`);
    throw e;
  }
}

interface Case {
  what: string;
  verdict: Verdict;
  run(): unknown;
}

const tag = <T>(arb: fc.Arbitrary<T>, verdict: Verdict) => arb.map((value) => ({ value, verdict }));
const worst = (...vs: Verdict[]): Verdict => (vs.includes('wrong') ? 'wrong' : vs.includes('either') ? 'either' : 'valid');
const show = (v: unknown): string => {
  try {
    return typeof v === 'bigint' ? `${v}n` : typeof v === 'symbol' ? v.toString() : (JSON.stringify(v) ?? String(v)).slice(0, 120);
  } catch {
    return Object.prototype.toString.call(v);
  }
};

// A revoked Proxy is made when a case runs: fast-check itself cannot look at one.
const REVOKED = Object.freeze({ revokedProxy: true });
const revoked = (): typeof REVOKED => REVOKED;
function live<T>(v: T): T {
  if (v !== REVOKED) return v;
  const r = Proxy.revocable({}, {});
  r.revoke();
  return r.proxy as T;
}

// Values of a wrong type wherever an option or argument has a type of its own.
const junk = fc.oneof(
  fc.string(),
  fc.object({ maxDepth: 1 }),
  fc.bigInt(),
  fc.constant(Symbol('x')),
  fc.constant(NaN),
  fc.func(fc.integer()),
);
const wrongBool = fc.oneof(junk, fc.integer(), fc.constant(null));
const dtype = tag(fc.constantFrom(...mp.DTYPES), 'valid');
const wrongDtype = tag(
  fc.oneof(
    fc.string().filter((s) => !(mp.DTYPES as readonly string[]).includes(s)),
    fc.integer(),
    fc.constant(null),
    fc.object({ maxDepth: 1 }),
  ),
  'wrong',
);
const shape = fc.oneof(
  tag(fc.array(fc.integer({ min: 0, max: 6 }), { maxLength: 4 }), 'valid'),
  tag(
    fc.array(fc.oneof(fc.integer({ min: -9, max: -1 }), fc.double({ noInteger: true }), fc.string(), fc.constant(null), fc.bigInt()), {
      minLength: 1,
      maxLength: 3,
    }),
    'wrong',
  ),
  tag(fc.oneof(fc.string(), fc.object({ maxDepth: 1 }), fc.constant(null), fc.constant(-1), fc.constant(1.5)), 'wrong'),
  // Past what memory holds, or past an exact byte count: refused or made, never a bare RangeError.
  tag(fc.constantFrom([2 ** 40], [2 ** 26, 2 ** 26], [2 ** 53], [1e300]), 'either'),
);
const tensorOpts = fc.oneof(
  tag(fc.constant(undefined), 'valid'),
  fc
    .record({ dtype: fc.oneof(dtype, wrongDtype), shared: fc.oneof(tag(fc.boolean(), 'valid'), tag(wrongBool, 'wrong')) })
    .map(({ dtype: d, shared }) => ({ value: { dtype: d.value, shared: shared.value }, verdict: worst(d.verdict, shared.verdict) })),
  tag(fc.oneof(fc.string(), fc.integer(), fc.constant(revoked())), 'wrong'),
);
const timeoutOpts = fc.oneof(
  tag(fc.oneof(fc.constant(undefined), fc.record({ timeout: fc.integer({ min: 0, max: 50 }) })), 'valid'),
  tag(
    fc.oneof(
      fc.string(),
      fc.integer(),
      fc.boolean(),
      fc.bigInt(),
      fc.constant(revoked()),
      fc.record({
        timeout: fc.oneof(fc.string(), fc.integer({ min: -1000, max: -1 }), fc.constant(NaN), fc.bigInt(), fc.object({ maxDepth: 0 })),
      }),
    ),
    'wrong',
  ),
);
const maxsize = fc.oneof(
  tag(fc.oneof(fc.integer({ min: 0, max: 64 }), fc.record({ maxsize: fc.integer({ min: 0, max: 64 }) })), 'valid'),
  tag(
    fc.oneof(
      fc.string(),
      fc.boolean(),
      fc.bigInt(),
      fc.double({ noInteger: true }),
      fc.constant(revoked()),
      fc.record({ maxsize: fc.oneof(fc.string(), fc.double({ noInteger: true }), fc.bigInt(), fc.constant(2 ** 40)) }),
    ),
    'wrong',
  ),
);
// What a put may carry: anything; refused or delivered, never an uncoded error.
const payload = fc.oneof(
  fc.anything({
    withBigInt: true,
    withDate: true,
    withMap: true,
    withSet: true,
    withTypedArray: true,
    withSparseArray: true,
    withNullPrototype: true,
  }),
  fc.constant(revoked()),
  fc.func(fc.integer()),
  fc.constant(Symbol('s')),
);

function cases(q: mp.Queue<unknown>): fc.Arbitrary<Case> {
  const make = (f: 'empty' | 'zeros') =>
    fc.tuple(shape, tensorOpts).map(
      ([s, o]): Case => ({
        what: `${f}(${show(s.value)}, ${show(o.value)})`,
        verdict: worst(s.verdict, o.verdict),
        run: () => mp[f](s.value as number[], live(o.value) as never).release(),
      }),
    );
  return fc.oneof(
    make('empty'),
    make('zeros'),
    fc
      .tuple(
        shape,
        fc.oneof(
          tag(fc.integer({ min: 0, max: 1 }), 'valid'),
          tag(fc.oneof(fc.string(), fc.object({ maxDepth: 1 }), fc.constant(Symbol('v'))), 'wrong'),
        ),
        tensorOpts,
      )
      .map(
        ([s, v, o]): Case => ({
          what: `full(${show(s.value)}, ${show(v.value)}, ${show(o.value)})`,
          verdict: worst(s.verdict, v.verdict, o.verdict),
          run: () => mp.full(s.value as number[], v.value as never, live(o.value) as never).release(),
        }),
      ),
    // tensor() takes { dtype, shape } (no `shared`): only a wrong dtype or unreadable options make a case wrong.
    fc
      .tuple(
        fc.oneof(fc.anything({ withBigInt: true, withTypedArray: true, withSparseArray: true }), fc.constant(revoked())),
        fc.oneof(
          tag(fc.constant(undefined), 'valid'),
          dtype.map((d) => ({ value: { dtype: d.value }, verdict: d.verdict })),
          wrongDtype.map((d) => ({ value: { dtype: d.value }, verdict: d.verdict })),
          tag(fc.oneof(fc.string(), fc.integer(), fc.constant(revoked())), 'wrong'),
        ),
      )
      .map(
        ([d, o]): Case => ({
          what: `tensor(${show(d)}, ${show(o.value)})`,
          verdict: o.verdict === 'wrong' ? 'wrong' : 'either',
          run: () => mp.tensor(live(d) as never, live(o.value) as never).release(),
        }),
      ),
    maxsize.map(
      (m): Case => ({ what: `new Queue(${show(m.value)})`, verdict: m.verdict, run: () => new mp.Queue(live(m.value) as never).close() }),
    ),
    fc.oneof(tag(fc.boolean(), 'valid'), tag(wrongBool, 'wrong')).map(
      (d): Case => ({
        what: `Pipe(${show(d.value)})`,
        verdict: d.verdict,
        run: () => mp.Pipe(d.value as never).forEach((c) => c.close()),
      }),
    ),
    fc.tuple(payload, timeoutOpts).map(
      ([v, o]): Case => ({
        what: `put(${show(v)}, ${show(o.value)}) then get()`,
        verdict: o.verdict === 'wrong' ? 'wrong' : 'either',
        run: async () => {
          try {
            await q.put(live(v), live(o.value) as never);
          } catch (e) {
            // Refused: nothing of it may be in the queue, and a valid put after it arrives first.
            await q.put('after a refused put');
            const next = await arrival(q, 'a valid put after a refused one');
            if (next !== 'after a refused put') {
              if (next instanceof mp.Tensor) next.release();
              throw new Broken(
                'left-behind',
                `a refused put (${String((e as Error)?.message).slice(0, 120)}) left ${show(next)} in the queue`,
              );
            }
            throw e;
          }
          // Accepted: it must arrive (a timeout here is a lost message, not a refusal).
          const got = await arrival(q, 'an accepted put');
          if (got instanceof mp.Tensor) got.release();
        },
      }),
    ),
    timeoutOpts.map(
      (o): Case => ({
        what: `get(${show(o.value)}) of a queue holding a message`,
        verdict: o.verdict,
        run: async () => {
          await q.put('waiting');
          try {
            if ((await q.get(live(o.value) as never)) !== 'waiting') throw new Error('a get returned another message');
          } catch (e) {
            // Refused for its options: the message must still be there.
            const left = await q.get({ timeout: CALL_MS / 2 }).catch((e2: unknown) => e2);
            if (left !== 'waiting')
              throw new Broken('lost', `the message was lost with a refused get (${String(e)}): the next get gave ${show(left)}`);
            throw e;
          }
        },
      }),
    ),
  );
}

export async function badInput(t: Trial): Promise<void> {
  const q = new mp.Queue<unknown>();
  const counts = { valid: 0, refused: 0, either: 0 };
  try {
    for (const c of fc.sample(cases(q), { seed: t.p.seed, numRuns: BAD_INPUT_CASES })) {
      let error: unknown = null;
      let timer: NodeJS.Timeout | undefined;
      try {
        const hang = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('HANG')), CALL_MS)));
        await Promise.race([Promise.resolve().then(() => c.run()), hang]);
      } catch (e) {
        error = e;
      } finally {
        clearTimeout(timer);
      }
      if (error instanceof Error && error.message === 'HANG') {
        t.fail('hang', `${c.what} did not settle within ${CALL_MS} ms`);
        break; // the queue may now hold a stray message: the rest would not judge this case alone
      }
      if (error instanceof Broken) t.fail(error.kind, `${c.what}: ${error.message}`);
      else if (error !== null && !mp.isTensorprocError(error))
        t.fail('uncoded-error', `${c.what}: ${String((error as Error)?.stack ?? error).slice(0, 300)}`);
      else if (error !== null && c.verdict === 'valid') t.fail('refused-valid', `${c.what}: ${(error as Error).message.slice(0, 200)}`);
      else if (error === null && c.verdict === 'wrong') t.fail('accepted-wrong', `${c.what} was accepted`);
      counts[error !== null ? 'refused' : c.verdict === 'either' ? 'either' : 'valid']++;
      if (t.failures.length >= 10) break;
    }
    if (!q.empty()) t.fail('lost-or-left', `${q.qsize()} message(s) left in the queue after the cases`);
  } finally {
    q.close();
  }
  t.stats.cases = counts;
}
