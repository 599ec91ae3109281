// Options that cannot even be read (a revoked Proxy: every property access throws the engine's
// TypeError) are the caller's error, refused with ERR_TP_INVALID_ARGUMENT and the engine's
// error as the cause, and nothing is lost (found by the fault campaign's bad-input kind).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';

checkLeaks();

function revoked(): any {
  const r = Proxy.revocable({}, {});
  r.revoke();
  return r.proxy;
}
const refused = (e: any): true =>
  isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT')(e) && (assert.ok(e.cause instanceof TypeError), true);

test('tensor factories refuse options that cannot be read', () => {
  assert.throws(() => mp.empty([2], revoked()), refused);
  assert.throws(() => mp.zeros([2], revoked()), refused);
  assert.throws(() => mp.full([2], 1, revoked()), refused);
});

test('new Queue(), put() and get() refuse options that cannot be read; the message waits for the next get', async () => {
  assert.throws(() => new mp.Queue(revoked()), refused);
  const q = new mp.Queue<string>();
  try {
    await assert.rejects(q.put('x', revoked()), refused);
    assert.ok(q.empty(), 'a refused put sent nothing');
    await q.put('kept');
    await assert.rejects(q.get(revoked()), refused);
    assert.equal(await q.get({ timeout: 10_000 }), 'kept');
  } finally {
    q.close();
  }
});

// An error message shows the bad value without calling anything of it (describeValue): String()
// of an object whose toString is not a function threw the engine's "Cannot convert object to
// primitive value" in place of ours (found by bad-input:1091399926).
test('a bad value whose toString is not callable, or a revoked Proxy, is still named in a coded error', async () => {
  const hostile = (): any => ({ toString: 'x', valueOf: 1 });
  const q = new mp.Queue<number>();
  try {
    await assert.rejects(
      q.put(1, { timeout: hostile() }),
      (e: any) => isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT')(e) && /\[object Object\]/.test(e.message),
    );
    await assert.rejects(q.get({ timeout: revoked() }), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
    assert.ok(q.empty());
  } finally {
    q.close();
  }
  assert.throws(() => new mp.Queue({ maxsize: hostile() }), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
  assert.throws(() => new mp.Queue({ maxsize: revoked() }), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
  assert.throws(() => mp.Pipe(hostile()), isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'));
  assert.throws(
    () => mp.spawn({ module: new URL(import.meta.url), export: 'none' }, { nprocs: hostile(), join: false }),
    isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'),
  );
});

test('describeValue, the helper of these messages, is not part of the public API', () => {
  assert.equal('describeValue' in mp, false);
});

// The DataLoader's options named a bad value with String() too: a timeout (or shuffle,
// numWorkers, startMethod) whose toString is not callable threw the engine's TypeError.
test('DataLoader options whose value cannot be turned into a string are refused with a coded error naming it', () => {
  const hostile = (): any => ({ toString: 'x', valueOf: 1 });
  const data = [1, 2, 3];
  for (const key of ['timeout', 'shuffle', 'numWorkers', 'startMethod']) {
    assert.throws(
      () => new mp.DataLoader(data, { [key]: hostile() }),
      (e: any) =>
        isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT')(e) && e.message.startsWith(key) && /\[object Object\]/.test(e.message),
      key,
    );
    assert.throws(
      () => new mp.DataLoader(data, { [key]: Object.create(null) }),
      isCoded(mp.InvalidArgumentError, 'ERR_TP_INVALID_ARGUMENT'),
      key,
    );
  }
});
