// NOTE [Spinning before sleeping]: the addon's spinWhile, GetSpin's back-off, and a Queue's
// get around its spin (timeouts, the setting that turns it off).
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { spawnSync } from 'node:child_process';
import * as mp from '../../src/index.js';
import { addon } from '../../src/native/index.js';
import { SharedWords } from '../../src/queue/shared-words.js';
import { GetSpin, PutSpin, SENT } from '../../src/queue/spin.js';
import { COUNT } from '../../src/queue/slots.js';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';

checkLeaks();

describe('addon.spinWhile', () => {
  test('returns true once another thread moves the word, false when nothing does', async () => {
    const state = SharedWords.create();
    try {
      const w = state.words;
      // The worker bumps word 0 until we set word 1: no sleep, whichever starts first.
      const worker = new Worker(
        `const { workerData: w } = require('node:worker_threads');
         while (Atomics.load(w, 1) === 0) Atomics.add(w, 0, 1);`,
        { eval: true, workerData: w },
      );
      const exited = new Promise((resolve) => worker.once('exit', resolve));
      try {
        // 60 s: the worker's start on a loaded machine, never reached when it runs.
        assert.equal(addon.spinWhile(state.mapping, 0, Atomics.load(w, 0), 60_000_000), true);
      } finally {
        Atomics.store(w, 1, 1);
        await exited;
      }
      assert.equal(addon.spinWhile(state.mapping, 8, Atomics.load(w, 2), 500), false, 'a word nobody moves: false after the bound');
      assert.equal(
        addon.spinWhile(state.mapping, 8, Atomics.load(w, 2) + 1, 500),
        true,
        'a word already away from `expected`: true at once',
      );
    } finally {
      state.close();
    }
  });

  test('a word outside the mapping or misaligned is a RangeError', () => {
    const state = SharedWords.create();
    try {
      assert.throws(() => addon.spinWhile(state.mapping, 4096, 0, 1), RangeError);
      assert.throws(() => addon.spinWhile(state.mapping, 2, 0, 1), RangeError);
    } finally {
      state.close();
    }
  });
});

describe('GetSpin', () => {
  test('spins that come to nothing back off (1, 3, 7 gets skipped), one that pays resets it', () => {
    const state = SharedWords.create();
    try {
      const spin = new GetSpin(state.words, state.mapping);
      const skipped = (): number => {
        let n = 0;
        while (spin.arm() === null) n++;
        return n;
      };
      for (const expected of [0, 1, 3, 7]) {
        assert.equal(skipped(), expected);
        spin.spin(Atomics.load(state.words, SENT), null); // nobody sends: runs out
      }
      assert.equal(skipped(), 15);
      const armed = Atomics.load(state.words, SENT);
      GetSpin.sent(state.words); // a put sent meanwhile: the spin pays at once
      spin.spin(armed, null);
      assert.equal(skipped(), 0, 'a spin that paid resets the back-off');
    } finally {
      state.close();
    }
  });

  test('TENSORPROC_SPIN_US=0 turns it off', () => {
    const spinUrl = new URL('../../src/queue/spin.js', import.meta.url).href;
    const wordsUrl = new URL('../../src/queue/shared-words.js', import.meta.url).href;
    const code = `import { GetSpin } from '${spinUrl}'; import { SharedWords } from '${wordsUrl}';
      const s = SharedWords.create(); const g = new GetSpin(s.words, s.mapping);
      let armed = 0; for (let i = 0; i < 10; i++) if (g.arm() !== null) armed++;
      s.close(); console.log(armed);`;
    for (const [env, want] of [
      ['0', '0'],
      ['200', '10'],
    ] as const) {
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
        env: { ...process.env, TENSORPROC_SPIN_US: env },
        encoding: 'utf8',
      });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout.trim(), want, `TENSORPROC_SPIN_US=${env}`);
    }
  });
});

describe('Queue get with the spin', () => {
  test('an empty queue still times out with QueueEmptyError naming the timeout given, and a put during a wait is received', async () => {
    const q = new mp.Queue<number>({ maxsize: 4 });
    try {
      await assert.rejects(
        q.get({ timeout: 0.1 }),
        (e: unknown) => isCoded(mp.QueueEmptyError, 'ERR_TP_QUEUE_EMPTY')(e) && /within 0\.1 ms/.test((e as Error).message),
      );
      await assert.rejects(
        q.get({ timeout: 20 }),
        (e: unknown) => isCoded(mp.QueueEmptyError, 'ERR_TP_QUEUE_EMPTY')(e) && /within 20 ms/.test((e as Error).message),
      );
      const got = q.get();
      await q.put(7);
      assert.equal(await got, 7);
    } finally {
      q.close();
    }
  });
});

describe('Queue put with the spin', () => {
  test('PutSpin: spins on a full COUNT back off (1, 3, 7 puts skipped); a freed slot ends one at once and resets it', () => {
    const state = SharedWords.create();
    try {
      const spin = new PutSpin(state.mapping);
      Atomics.store(state.words, COUNT, 2); // full at maxsize 2, and nobody gets
      const skipped = (): number => {
        let n = 0;
        while (spin.spin(COUNT * 4, 2, null) === 0) n++;
        return n; // the call that did spin ran out (nothing moved COUNT)
      };
      for (const expected of [0, 1, 3, 7]) assert.equal(skipped(), expected);
      for (let i = 0; i < 15; i++) assert.equal(spin.spin(COUNT * 4, 2, null), 0, 'backed off');
      Atomics.store(state.words, COUNT, 1); // a get took one: the next spin ends at once
      spin.spin(COUNT * 4, 2, null); // its back-off ran out: this one spins, sees the slot, and pays
      Atomics.store(state.words, COUNT, 2);
      assert.equal(skipped(), 0, 'a spin that paid resets the back-off');
    } finally {
      state.close();
    }
  });

  test('a full queue still times out with QueueFullError naming the timeout given; a get during a waiting put lets it in', async () => {
    const q = new mp.Queue<number>({ maxsize: 1 });
    try {
      await q.put(1);
      for (const timeout of [0.1, 20]) {
        await assert.rejects(
          q.put(2, { timeout }),
          (e: unknown) => isCoded(mp.QueueFullError, 'ERR_TP_QUEUE_FULL')(e) && new RegExp(`for ${timeout} ms`).test((e as Error).message),
        );
      }
      const put = q.put(3); // spins (nobody gets meanwhile in this thread), then waits
      assert.equal(await q.get(), 1);
      await put;
      assert.equal(await q.get(), 3);
      assert.equal(q.qsize(), 0);
    } finally {
      q.close();
    }
  });
});
