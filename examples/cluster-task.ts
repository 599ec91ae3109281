// The task of examples/cluster-map.ts: agents import it from under their --root (dist/examples).
/** Where it ran: the host id its agent was started with. */
export function where(x: number): string {
  return `${x} on ${process.env.TENSORPROC_HOST_ID}`;
}
