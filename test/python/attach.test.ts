// tensorproc.attach() in Python (python/tensorproc/_attach.py, docs/named.md's exchange): a
// Python program started with nothing but names reaches this process's named Queue, Pipe end
// and Event, under both strategies; a tensor put here is written there and the other way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as mp from '../../src/index.js';
import { checkLeaks } from '../helpers/leaks.js';
import { noPython, python, pythonEnv, repo } from './python-peer.js';

checkLeaks();

for (const strategy of ['file_descriptor', 'file_system'] as const) {
  test(`${strategy}: a Python program attaches by name; tensors are shared both ways`, { skip: noPython }, async () => {
    mp.setSharingStrategy(strategy);
    const prefix = `tp-py-${process.pid}-${strategy}`;
    const work = new mp.Queue<mp.Tensor>({ name: `${prefix}-work` });
    const [pipe] = mp.Pipe({ name: `${prefix}-pipe` });
    const done = new mp.Event({ name: `${prefix}-done` });
    const child = spawn(python!, [`${repo}test/python/attach_peer.py`, prefix], {
      stdio: ['ignore', 'inherit', 'pipe'],
      env: pythonEnv(strategy),
    });
    let err = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const t = mp.full([3, 4], 1, { dtype: 'float32', shared: true });
      await work.put(t);
      const first = (await Promise.race([pipe.recv(), exited.then((c) => assert.fail(`python exited ${c}: ${err}`))])) as {
        errors: Record<string, string>;
        missing: string;
        sum: number;
        mine: mp.Tensor;
      };
      assert.equal(first.missing, 'ERR_TP_NAME_NOT_FOUND');
      assert.deepEqual(first.errors, { object: 'ERR_TP_NOT_TRANSFERABLE', int: 'ERR_TP_NOT_TRANSFERABLE', empty: 'ERR_TP_QUEUE_EMPTY' });
      assert.equal(first.sum, 24);
      assert.deepEqual(t.toArray(), new Array(3).fill(new Array(4).fill(2)), "Python's write is seen here");
      assert.deepEqual(first.mine.dtype, 'int64');
      first.mine.set([1, 1], 40n);
      await pipe.send('written');
      assert.deepEqual(await pipe.recv(), [
        [1, 2],
        [3, 40],
      ]);
      assert.equal(await done.wait(30_000), true);
      assert.equal(await exited, 0, err);
      t.release();
      first.mine.release();
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
      work.close();
      pipe.close();
      done.close();
      mp.setSharingStrategy('file_descriptor');
    }
  });
}
