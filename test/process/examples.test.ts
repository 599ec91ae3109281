// The examples of issue 9 run as programs, as a user runs them.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { checkLeaks } from '../helpers/leaks.js';
import { startPeer } from '../helpers/child.js';

checkLeaks();

it("pytorch/examples' mnist_hogwild: 4 Processes train one shared model in place, and the main process sees it trained", {
  timeout: 60_000,
}, async () => {
  const script = fileURLToPath(new URL('../../examples/hogwild.js', import.meta.url));
  const peer = startPeer(script, ['--json']);
  const report = await peer.next();
  assert.deepEqual(report.exitCodes, [0, 0, 0, 0]);
  // The parameters start at zero (every class alike: a third right); only training written
  // into the parent's memory by the children moves them.
  assert.ok(report.before < 0.5, `before: ${report.before}`);
  assert.ok(report.after > 0.85, `after: ${report.after}`);
  assert.deepEqual(await peer.exited, { code: 0, signal: null });
});
