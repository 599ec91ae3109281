// The child side of test/helpers/child.ts's startPeer(): commands arrive as JSON lines on
// stdin ({ cmd, ... }), each handler's result (or error) goes back as one JSON line.
import { createInterface } from 'node:readline';

export type Handlers = Record<string, (m: any) => unknown>;

/** Writes one JSON line to the test; handlers may also call it for progress ("waiting"). */
export function reply(x: unknown): void {
  process.stdout.write(`${JSON.stringify(x)}\n`);
}

/** Runs handlers for each command until stdin closes; an error is answered as { error }. */
export async function serveCommands(handlers: Handlers): Promise<void> {
  for await (const line of createInterface({ input: process.stdin })) {
    const m = JSON.parse(line);
    try {
      reply(await handlers[m.cmd]!(m));
    } catch (e: any) {
      reply({ error: { name: e.name, code: e.code, message: e.message } });
    }
  }
}
