// Pools for the tests: every one a test opens is terminated and joined at the end of its
// file, whatever happened, before the leak check (register with stopPoolsAfter() first).
import { after } from 'node:test';
import { Pool, type PoolOptions } from 'tensorproc';

const TASKS = new URL('./fixtures/tasks.js', import.meta.url);
export const task = (name: string) => ({ module: TASKS, export: name });

const opened = new Set<Pool>();

export function openPool(options: number | PoolOptions): Pool {
  const pool = new Pool(options);
  opened.add(pool);
  return pool;
}

/**
 * At the end of the file, each pool still open is closed and joined (its workers exit on
 * their own, letting go of what they hold), or terminated if that takes more than 5 s.
 */
export function stopPoolsAfter(): void {
  after(async () => {
    await Promise.all(
      [...opened].map(async (pool) => {
        pool.close();
        const timer = setTimeout(() => pool.terminate(), 5000);
        await pool.join();
        clearTimeout(timer);
      }),
    );
  });
}
