// Which CUDA driver the CUDA tests use: the stand-in (test/cuda/fixtures/fakecuda.c, compiled
// here with the system C compiler) by default; the machine's own libcuda.so.1 when
// TP_CUDA_REAL=1 (the device script, .gpu/run.sh). Call useDriver() before anything touches CUDA:
// the library path is read on the first call, and children inherit it.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('../../../test/cuda/fixtures/fakecuda.c', import.meta.url));

/** Builds the stand-in (once per source version and variant) and returns its path. */
export function buildFake(variant: '' | 'old' = ''): string {
  const text = readFileSync(source);
  const hash = createHash('sha256').update(text).update(variant).digest('hex').slice(0, 16);
  const out = join(tmpdir(), `tensorproc-fakecuda-${hash}.so`);
  if (existsSync(out)) return out;
  const tmp = `${out}.${process.pid}`;
  const args = ['-O2', '-shared', '-fPIC', ...(variant === 'old' ? ['-DFAKECUDA_OLD'] : []), '-o', tmp, source];
  let built = false;
  for (const cc of ['cc', 'gcc']) {
    try {
      execFileSync(cc, args, { stdio: 'pipe' });
      built = true;
      break;
    } catch {
      // try the next compiler
    }
  }
  if (!built) execFileSync('g++', ['-x', 'c', ...args], { stdio: 'pipe' });
  renameSync(tmp, out); // atomic: another test run may build the same file at once
  return out;
}

export const REAL = process.env.TP_CUDA_REAL === '1';

/** Points this process (and its children) at the driver the tests use. */
export function useDriver(): void {
  if (!REAL) process.env.TENSORPROC_CUDA_LIBRARY = buildFake();
}

/**
 * A skip reason when no driver is usable (the real one being absent), else false;
 * TENSORPROC_REQUIRE_CUDA=1 turns a skip into a failure, so a device run cannot pass by skipping.
 */
export function cudaSkip(available: boolean, reason: string | null): string | false {
  if (available) return false;
  if (process.env.TENSORPROC_REQUIRE_CUDA === '1') throw new Error(`TENSORPROC_REQUIRE_CUDA=1 but CUDA is unavailable: ${reason}`);
  return `no CUDA driver (${reason})`;
}
