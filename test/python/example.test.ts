// examples/python/: the Node program and the Python one started separately, as the README's
// "Beyond one process tree" says; they meet by name only, and the scores Python's model writes
// into Node's tensors are read back in Node. Needs torch in the Python that runs the tests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { checkLeaks } from '../helpers/leaks.js';
import { hasTorch, noPython, python, pythonEnv, repo } from './python-peer.js';

checkLeaks();
const node = fileURLToPath(new URL('../../examples/python/score-images.js', import.meta.url));

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  const p = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  p.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  return new Promise((resolve) => p.on('exit', (code) => resolve({ code, out })));
}

test('a Node DataLoader feeds a PyTorch model in a separately started Python program', {
  skip: noPython ?? (hasTorch ? undefined : 'no torch in the Python that runs the tests'),
}, async () => {
  const env = pythonEnv('file_descriptor');
  // Python first: attach waits for the names, as a user starting it in another terminal would see.
  const py = run(python!, [`${repo}examples/python/score_images.py`], env);
  const js = run(process.execPath, [node, '6'], env);
  const [n, p] = await Promise.all([js, py]);
  assert.equal(n.code, 0, n.out);
  assert.equal(p.code, 0, p.out);
  assert.match(p.out, /scored 6 batches/);
  assert.match(n.out, /^6 batches scored in Python; mean score by label:$/m);
  const means = [...n.out.matchAll(/^ {2}(\d): (-?\d+\.\d+)$/gm)].map((m) => Number(m[2]));
  assert.equal(means.length, 4);
  assert.ok(means.every(Number.isFinite) && means.some((m) => m !== 0), `scores written by the model: ${means}`);
  assert.notEqual(means[0], means[3], 'different images, different scores');
});
