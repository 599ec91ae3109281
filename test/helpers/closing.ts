// For child targets in tests: runs `fn`, then closes the queues, events and locks it was
// given, whatever happened, so that thread children leave no descriptor in the test process.

export interface Closable {
  close(): void;
}

export async function closing<T>(objs: Closable[], fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } finally {
    for (const o of objs) o.close();
  }
}
