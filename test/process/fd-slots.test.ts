// NOTE [Spawn arguments]: descriptors that come with the arguments reach a process child in
// stdio slots 4, 5, ... and are moved to close-on-exec descriptors before fn runs. encodeArgs
// produces none yet (the transport layer will), so this drives the internal pieces directly.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { checkLeaks } from '../helpers/leaks.js';
import { addon } from '../../src/native/index.js';
import { CHILD_FD_BASE, encodeArgs } from '../../src/process/args.js';
import type { ChildHandle } from '../../src/process/child-handle.js';
import { ProcessContext } from '../../src/process/context.js';
import { ProcessChild } from '../../src/process/process-child.js';

checkLeaks();

it('argument descriptors reach a process child through stdio slots', { timeout: 60_000 }, async () => {
  const name = `tensorproc-test-slot-${process.pid}`;
  const memfd = addon.memfdCreate(name, 64);
  try {
    const children: ChildHandle[] = [];
    const ctx = new ProcessContext(children, false);
    children.push(
      new ProcessChild(
        {
          kind: 'start',
          index: 0,
          module: new URL('./fixtures/targets.js', import.meta.url).href,
          exportName: 'hasMemfd',
          args: encodeArgs([name]).bytes,
          fds: [CHILD_FD_BASE],
          preload: null,
        },
        { entry: new URL('../../src/process/child-process.js', import.meta.url), execArgv: [], daemon: false, argFds: [memfd] },
        (c) => ctx.onExit(c),
      ),
    );
    assert.equal(await ctx.join(), true);
  } finally {
    addon.close(memfd);
  }
});
