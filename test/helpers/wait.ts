// Bounded polling for a condition another process brings about (a name the manager removes,
// a slot it reclaims). Not a sleep to coordinate: it returns as soon as the condition holds,
// and fails loudly if it never does.
export async function waitFor(cond: () => boolean | Promise<boolean>, ms = 5000): Promise<number> {
  const t0 = performance.now();
  while (!(await cond())) {
    if (performance.now() - t0 > ms) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 2));
  }
  return performance.now() - t0;
}
