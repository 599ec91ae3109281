import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as mp from 'tensorproc';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';
import { startPeer, fixture } from '../helpers/child.js';

checkLeaks();
const peerScript = fixture(import.meta.url, 'peer.js');

async function strategyIn(env: NodeJS.ProcessEnv): Promise<any> {
  const peer = startPeer(peerScript, [], { env: { ...process.env, ...env } });
  peer.send({ cmd: 'strategy' });
  const r = await peer.next();
  peer.send({ cmd: 'exit' });
  await peer.exited;
  return r;
}

test('the strategies, the default and setSharingStrategy', () => {
  assert.deepEqual(mp.getAllSharingStrategies(), new Set(['file_descriptor', 'file_system']));
  const before = mp.getSharingStrategy();
  try {
    mp.setSharingStrategy('file_system');
    assert.equal(mp.getSharingStrategy(), 'file_system');
    mp.setSharingStrategy('file_descriptor');
    assert.equal(mp.getSharingStrategy(), 'file_descriptor');
  } finally {
    mp.setSharingStrategy(before);
  }
});

test('an unknown strategy is a TypeError listing the valid names', () => {
  assert.throws(
    () => mp.setSharingStrategy('shared_memory' as mp.SharingStrategy),
    (e: any) =>
      isCoded(mp.InvalidStrategyError, 'ERR_TP_INVALID_STRATEGY')(e) &&
      e instanceof TypeError &&
      /'file_descriptor', 'file_system'/.test(e.message),
  );
});

test('TENSORPROC_SHARING_STRATEGY sets the default, and a bad value is a coded error', async () => {
  assert.deepEqual(await strategyIn({ TENSORPROC_SHARING_STRATEGY: undefined }), { strategy: 'file_descriptor' });
  assert.deepEqual(await strategyIn({ TENSORPROC_SHARING_STRATEGY: 'file_system' }), { strategy: 'file_system' });
  const bad = await strategyIn({ TENSORPROC_SHARING_STRATEGY: 'nope' });
  assert.equal(bad.error.code, 'ERR_TP_INVALID_STRATEGY');
  assert.match(bad.error.message, /TENSORPROC_SHARING_STRATEGY/);
});
