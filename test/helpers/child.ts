// Children for tests: started with extra descriptors, talked to by lines on stdin/stdout
// (never by sleeps), and always reaped, even when the test fails.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { after } from 'node:test';
import { fileURLToPath } from 'node:url';

const started = new Set<ChildProcess>();
after(() => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

export interface Peer {
  readonly child: ChildProcess;
  /** The next line the child prints, parsed as JSON. */
  next(): Promise<any>;
  send(msg: unknown): void;
  /** Resolves with the exit code and signal once the child is gone. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function fixture(url: string | URL, name: string): string {
  return fileURLToPath(new URL(`./fixtures/${name}`, url));
}

/**
 * Starts `node script ...args`. `fds` are given to the child as descriptors 3, 4, …;
 * `wrap` runs it under another command (e.g. ['prlimit', '--nofile=20']).
 */
export function startPeer(
  script: string,
  args: string[] = [],
  opts: { fds?: number[]; env?: NodeJS.ProcessEnv; wrap?: string[] } = {},
): Peer {
  const cmd = [...(opts.wrap ?? []), process.execPath, script, ...args];
  const child = spawn(cmd[0]!, cmd.slice(1), {
    stdio: ['pipe', 'pipe', 'inherit', ...(opts.fds ?? [])],
    env: opts.env ?? process.env,
  });
  started.add(child);
  const lines = createInterface({ input: child.stdout! });
  const queue: string[] = [];
  const waiters: ((l: string | null) => void)[] = [];
  let closed = false;
  lines.on('line', (l) => (waiters.length ? waiters.shift()!(l) : queue.push(l)));
  lines.on('close', () => {
    closed = true;
    while (waiters.length) waiters.shift()!(null);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      started.delete(child);
      resolve({ code, signal });
    }),
  );
  return {
    child,
    exited,
    next: () =>
      new Promise((resolve, reject) => {
        const take = (l: string | null) => (l === null ? reject(new Error('child closed its output')) : resolve(JSON.parse(l)));
        if (queue.length) take(queue.shift()!);
        else if (closed) take(null);
        else waiters.push(take);
      }),
    send: (msg) => child.stdin!.write(`${JSON.stringify(msg)}\n`),
  };
}
