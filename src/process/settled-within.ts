// Waiting for a promise, but not for longer than a limit.

/**
 * True once `p` has fulfilled, false if `ms` pass first (a rejection of `p` is thrown). The
 * timer is cleared either way: it never keeps the process alive after the answer.
 */
export async function settledWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(resolve, ms, false)));
  try {
    return await Promise.race([p.then(() => true as const), late]);
  } finally {
    clearTimeout(timer);
  }
}
