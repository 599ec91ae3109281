// W6 under `tensorproc bench` (issue 28): --json --only W6 at smoke counts prints, per size,
// Node -> Python for both strategies, Node -> Node for both, and the socket copy (torch's
// Queue where a python3 imports torch), each a msgs/s record. Figures are not judged here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { BenchRecord } from '../../bench/lib/record.js';
import { checkLeaks } from '../helpers/leaks.js';
import { noPython } from '../python/python-peer.js';

checkLeaks();
const cli = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

test('bench --json --only W6: Node -> Python, Node -> Node and the socket copy at each size', { skip: noPython }, () => {
  const r = spawnSync(process.execPath, [cli, 'bench', '--json', '--only', 'W6'], {
    encoding: 'utf8',
    timeout: 240_000,
    env: { ...process.env, TENSORPROC_BENCH_SMOKE: '1', W6_SIZES: '1024,1048576' },
  });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as BenchRecord & { not_measured?: string });
  assert.deepEqual(
    lines.filter((x) => x.not_measured !== undefined && x.impl !== 'torch Queue, Python -> Python'),
    [],
  );
  const records = lines.filter((x) => 'value' in x);
  for (const c of ['1 KiB', '1 MiB']) {
    const impls = records.filter((x) => x.case === c).map((x) => x.impl);
    for (const impl of [
      'tensorproc file_descriptor',
      'tensorproc file_system',
      'Node -> Node file_descriptor',
      'Node -> Node file_system',
      'bytes over a Unix socket',
    ])
      assert.ok(impls.includes(impl), `${c}: ${impl} in ${impls.join(', ')}`);
  }
  for (const x of records) {
    assert.equal(x.workload, 'W6');
    assert.equal(x.unit, 'msgs/s');
    assert.ok(Number.isFinite(x.value) && x.value > 0, JSON.stringify(x));
  }
});
