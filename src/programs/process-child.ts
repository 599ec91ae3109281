// Entry point of a process child (startMethod 'spawn'), run as `node [execArgv] process-child.js`
// (or its bundle: NOTE [The process child's bundle]). See NOTE [Spawn control channel]
// (process/messages.ts) and NOTE [No orphans] (process/process-handle.ts).
import { addon } from '../native/addon.js';
import { ChannelReader, sendFrames } from '../process/channel-io.js';
import { CONTROL_FD, toFrames, type ErrorMessage, type LoadedMessage, type StartMessage } from '../process/messages.js';
import { runTarget } from '../process/child-main.js';
import { PARENT_GONE, PARENT_PID_ENV } from '../env.js';

// First of all, before any await: die with the parent. PR_SET_PDEATHSIG does not fire for a
// parent that died before the prctl, so compare getppid() with the pid the parent gave us.
addon.setParentDeathSignal(9 /* SIGKILL */);
const expectedParent = Number(process.env[PARENT_PID_ENV]);
if (addon.getppid() !== expectedParent) process.exit(1);
delete process.env[PARENT_PID_ENV];

// Slot 3 is inheritable; our own children must not hold it (nor the argument slots), so
// move each to a close-on-exec copy.
const inherit = (slot: number): number => {
  const fd = addon.dup(slot);
  addon.close(slot);
  return fd;
};
const channel = inherit(CONTROL_FD);

let reader!: ChannelReader<StartMessage>;
const start = await new Promise<StartMessage>((resolve) => {
  // The channel's end is the parent's death: said on globalThis before the exit hooks run, so
  // that the manager client says no goodbye even if the kernel has not reparented us yet (NOTE
  // [No goodbye after the parent], client.ts, which this bundle does not share).
  reader = new ChannelReader<StartMessage>(channel, resolve, () => {
    (globalThis as Record<symbol, unknown>)[PARENT_GONE] = true;
    process.exit(1);
  });
  reader.drain(); // the parent wrote the message before starting us: usually it is there
  reader.watch(true);
});
// From now on the channel only tells us that the parent is gone (end of stream): that must
// not keep this process alive.
reader.setRef(false);

const report = (message: ErrorMessage): void => {
  reader.close(); // one poll per descriptor: sendFrames may need its own
  sendFrames(channel, toFrames(message)).then(
    () => process.exit(1),
    () => process.exit(1),
  );
};
await runTarget(start, 'spawn', start.fds.map(inherit), {
  pid: process.pid,
  borrowed: false,
  report,
  // Every reduction, for framed arguments (NOTE [Spawn arguments]).
  loadReductions: () => import('./reductions.js'),
  // A datagram this small always fits the socket buffer: never EAGAIN, so no poll of its own.
  onLoaded: () => void addon.send(channel, toFrames({ kind: 'loaded' } satisfies LoadedMessage)[0]!),
});
