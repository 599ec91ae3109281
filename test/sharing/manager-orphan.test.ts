// NOTE [No goodbye after the parent] (client.ts): a child that learns of its parent's SIGKILL
// before its own (PR_SET_PDEATHSIG) and exits through its exit hooks must not read to the
// manager as a process that let go on purpose, or its messages in flight wait the clean grace
// from its exit, past the 2 s promised from the parent's kill (fault campaign
// kill-parent:1879986325). The order is forced: the child's death signal is off.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { checkLeaks } from '../helpers/leaks.js';
import { fixture, startPeer } from '../helpers/child.js';
import { running } from '../helpers/procs.js';
import { env, exists, waitFor, waitWithLog } from './fixtures/manager-harness.js';

checkLeaks();

test('a child that outlives its SIGKILLed parent for a moment and exits cleanly: its messages in flight get the crash grace', async () => {
  const parent = startPeer(fixture(new URL('./x', import.meta.url), 'orphan-parent.js'), [], { env: env() });
  const { child, names } = await parent.next();
  try {
    assert.ok(names.length > 0 && names.every(exists));
    parent.child.kill('SIGKILL');
    await parent.exited;
    await waitFor(() => !running(child)); // it exits by itself, at its control channel's end
    // The log waited for too: each name's line is written just after its unlink.
    const read = (): string => readFileSync(process.env.TENSORPROC_MANAGER_LOG!, 'latin1');
    const removedAll = (log: string): boolean => names.every((n: string) => log.includes(`removed ${n}: `));
    await waitWithLog(() => !names.some(exists) && removedAll(read()));
    const log = read();
    assert.match(log, new RegExp(`swept after pid ${child} died`), 'judged as killed, not as a process that left');
    for (const n of names)
      assert.match(
        log,
        new RegExp(
          `removed ${n}: 1 reference\\(s\\) in flight (were not taken within 1000 ms of its holders' death|, and the last process that could take them was killed)`,
        ),
      );
  } finally {
    if (running(child)) process.kill(child, 'SIGKILL');
  }
});
