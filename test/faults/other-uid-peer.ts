// The peer of the other-uid trial (trial-other-uid.ts), run as another user (uid 65534 by
// setpriv): it tries what such a user might against our segments, descriptors and manager,
// and prints one JSON line: what it managed to do (each a failure of ours) and what it was
// refused. It loads nothing of tensorproc. Arguments: a JSON object (see Attack).
import { closeSync, constants, openSync, readdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { execFileSync } from 'node:child_process';

interface Attack {
  /** Names of our segments in /dev/shm (file_system). */
  names: string[];
  /** Our processes, whose descriptors (memfds, sockets) it tries to open through /proc. */
  pids: number[];
  /** Our manager's socket, or null (file_descriptor: none is needed). */
  socket: string | null;
  /** Pids under whose names it makes files of its own in /dev/shm, which our manager must leave alone. */
  plant: number[];
}

const a = JSON.parse(process.argv[2]!) as Attack;
const managed: string[] = [];
const refused: Record<string, number> = {};
/** Counts a refusal by its error code (EACCES, EPERM…). */
function refuse(_what: string, e: unknown): void {
  const code = (e as { code?: string }).code ?? String(e);
  refused[code] = (refused[code] ?? 0) + 1;
}

for (const name of a.names) {
  for (const [mode, flag] of [
    ['read', constants.O_RDONLY],
    ['write', constants.O_RDWR],
  ] as const) {
    try {
      closeSync(openSync(`/dev/shm/${name}`, flag));
      managed.push(`opened our segment ${name} to ${mode}`);
    } catch (e) {
      refuse(name, e);
    }
  }
  try {
    unlinkSync(`/dev/shm/${name}`);
    managed.push(`removed our segment ${name}`);
  } catch (e) {
    refuse(name, e);
  }
}

for (const pid of a.pids) {
  let fds: string[] = [];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
    managed.push(`listed the descriptors of our process ${pid}`);
  } catch (e) {
    refuse(`${pid}`, e);
  }
  for (const fd of fds) {
    try {
      closeSync(openSync(`/proc/${pid}/fd/${fd}`, constants.O_RDONLY));
      managed.push(`opened descriptor ${fd} of our process ${pid}`);
    } catch (e) {
      refuse(fd, e);
    }
  }
}

// Files of its own under names our processes' segments have: the manager must not take them
// for ours when those processes die (issue 10, item 8).
const planted: string[] = [];
for (const pid of a.plant) {
  const file = `tensorproc_${pid}_planted${process.getuid!()}`;
  const fifo = `tensorproc_${pid}_fifo${process.getuid!()}`;
  writeFileSync(`/dev/shm/${file}`, 'not a segment');
  planted.push(file);
  try {
    // mkfifo: Node has no binding for it; coreutils does.
    execFileSync('mkfifo', [`/dev/shm/${fifo}`]);
    planted.push(fifo);
  } catch {
    // no mkfifo here: the regular file alone
  }
}

async function tryManager(path: string): Promise<void> {
  await new Promise<void>((resolve) => {
    const s = connect(path);
    s.on('connect', () => {
      managed.push(`connected to our manager's socket ${path}`);
      s.destroy();
      resolve();
    });
    s.on('error', (e) => {
      // EACCES: the 0700 directory keeps it out; EPROTOTYPE would mean it reached the socket.
      if ((e as { code?: string }).code === 'EACCES') refuse(path, e);
      else managed.push(`reached our manager's socket ${path} (${(e as { code?: string }).code})`);
      resolve();
    });
  });
}
if (a.socket !== null) await tryManager(a.socket);

process.stdout.write(`${JSON.stringify({ uid: process.getuid!(), managed, refused, planted })}\n`);
