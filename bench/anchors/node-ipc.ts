// W1 anchors (YARDSTICK.md) for what a Node user has without tensorproc, to move a fresh
// Float32Array of SIZE bytes, written in full, from a producer to a consumer:
//   fork              child_process.fork with serialization 'advanced' (structured clone over
//                     the IPC pipe: two copies)
//   worker-copy       worker_threads postMessage (one copy, inside one process)
//   worker-transfer   worker_threads postMessage with the buffer transferred (no copy; a fresh
//                     buffer per message all the same, as the producer makes one)
// As tensorproc's queue in W1 (maxsize 64), the producer runs at most 64 messages ahead: a
// fork child waits for the callbacks of its sends, a worker for the consumer's acks (one
// every 32 messages). Prints one JSON line: the consumer's seconds from the 2nd message.
//
//   node node-ipc.js fork|worker-copy|worker-transfer SIZE COUNT
import { fork } from 'node:child_process';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';

const WINDOW = 64;
const ACK_EVERY = 32;
const self = fileURLToPath(import.meta.url);

interface Job {
  size: number;
  count: number;
  transfer: boolean;
}

function fresh(size: number, i: number): Float32Array {
  const t = new Float32Array(size / 4);
  t.fill(i); // a real producer writes the whole tensor
  return t;
}

/** The fork child: sends as the pipe takes them, at most WINDOW unconfirmed. */
async function forkProducer(size: number, count: number): Promise<void> {
  let inFlight = 0;
  let wake: (() => void) | null = null;
  const sent = (): void => {
    inFlight--;
    wake?.();
  };
  for (let i = 0; i < count; i++) {
    while (inFlight >= WINDOW) await new Promise<void>((r) => (wake = r));
    inFlight++;
    process.send!(fresh(size, i), undefined, {}, sent);
  }
}

/** The worker: posts, waiting for the consumer's acks past WINDOW. */
async function workerProducer({ size, count, transfer }: Job): Promise<void> {
  let acked = 0;
  let wake: (() => void) | null = null;
  parentPort!.on('message', (n: number) => {
    acked = n;
    wake?.();
  });
  for (let i = 0; i < count; i++) {
    while (i - acked >= WINDOW) await new Promise<void>((r) => (wake = r));
    const t = fresh(size, i);
    parentPort!.postMessage(t, transfer ? [t.buffer as ArrayBuffer] : []);
  }
}

/** The consumer: this thread. Resolves to the seconds from the 2nd message to the last. */
function consume(impl: string, size: number, count: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let got = 0;
    let t0 = 0;
    let s = 0;
    let ack: (n: number) => void = () => {};
    let end: () => void = () => {};
    const onMessage = (x: Float32Array): void => {
      s += x[0]! + x[x.length - 1]!;
      if (++got === 1) t0 = performance.now();
      if (got % ACK_EVERY === 0) ack(got);
      if (got === count) {
        const seconds = (performance.now() - t0) / 1000;
        end();
        resolve(Number.isNaN(s) ? NaN : seconds);
      }
    };
    if (impl === 'fork') {
      const c = fork(self, ['producer', String(size), String(count)], { serialization: 'advanced', stdio: 'inherit' });
      c.on('message', (m) => onMessage(m as Float32Array));
      c.on('error', reject);
      end = () => c.kill();
    } else {
      const w = new Worker(self, { workerData: { size, count, transfer: impl === 'worker-transfer' } satisfies Job });
      w.on('message', onMessage);
      w.on('error', reject);
      ack = (n) => w.postMessage(n);
      end = () => void w.terminate();
    }
  });
}

if (!isMainThread) {
  await workerProducer(workerData as Job);
} else if (process.argv[2] === 'producer') {
  await forkProducer(Number(process.argv[3]), Number(process.argv[4]));
} else {
  const [impl, size, count] = [process.argv[2] ?? '', Number(process.argv[3]), Number(process.argv[4])];
  if (!['fork', 'worker-copy', 'worker-transfer'].includes(impl) || !(size >= 4) || !(count >= 2)) {
    process.stderr.write('usage: node node-ipc.js fork|worker-copy|worker-transfer SIZE COUNT\n');
    process.exit(2);
  }
  const seconds = await consume(impl, size, count);
  console.log(JSON.stringify({ impl: `node ${impl}`, node: process.version, bytes: size, count, seconds }));
  process.exit(0);
}
