// The leak check every suite runs: after the suite, no /dev/shm/tensorproc_* segment and no
// descriptor that was not open before it.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { emptyCache } from '../../src/index.js';

export function shmSegments(): string[] {
  return readdirSync('/dev/shm').filter((n) => n.startsWith('tensorproc_'));
}

/**
 * Names in /dev/shm whose header still has a reference slot of `pid` (NOTE [Reference
 * slots]): after `pid` died, the manager has not taken back what it held yet.
 */
export function namesHeldBy(pid: number): string[] {
  const out: string[] = [];
  for (const n of shmSegments()) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(`/dev/shm/${n}`).subarray(0, 4096);
    } catch {
      continue; // removed meanwhile
    }
    if (bytes.length < 4096) continue;
    const words = new Int32Array(bytes.buffer, bytes.byteOffset, 1024);
    for (let i = 16; i < 1024; i += 2) if (words[i] === pid) out.push(n);
  }
  return out;
}

export function openFds(): Map<number, string> {
  const out = new Map<number, string>();
  for (const n of readdirSync('/proc/self/fd')) {
    try {
      out.set(Number(n), readlinkSync(`/proc/self/fd/${n}`));
    } catch {
      // the descriptor readdir itself used, closed by now
    }
  }
  return out;
}

/** Collects garbage twice, letting finalizers run in between. Needs --expose-gc. */
export async function collectGarbage(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 3; i++) {
    gc?.();
    await new Promise((r) => setImmediate(r));
  }
}

/** Registers before/after hooks on the current file: call once at the top of a test file. */
export function checkLeaks(): void {
  let fdsBefore: Map<number, string>;
  let shmBefore: Set<string>;
  before(() => {
    fdsBefore = openFds();
    shmBefore = new Set(shmSegments());
  });
  after(async () => {
    // Tensors the suite dropped go back to the cache when collected; the cache itself is
    // memory kept on purpose, so it is emptied before looking for what is left.
    await collectGarbage();
    emptyCache();
    // A suite that ran code importing 'tensorproc' (the examples) also holds the package
    // bundle, a second copy with a cache of its own (NOTE [The package bundle]).
    (globalThis as { [k: symbol]: { emptyCache(): void } | undefined })[Symbol.for('tensorproc.bundle')]?.emptyCache();
    const leakedShm = shmSegments().filter((n) => !shmBefore.has(n));
    assert.deepEqual(leakedShm, [], 'segments left in /dev/shm');
    const now = openFds();
    const leaked = [...now].filter(([fd, target]) => fdsBefore.get(fd) !== target).map(([fd, t]) => `${fd} -> ${t}`);
    assert.deepEqual(leaked, [], 'descriptors leaked');
  });
}
