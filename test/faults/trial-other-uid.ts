// The other-uid trial of the fault campaign (NOTE [Fault trials] in plan.ts): a peer running
// as another user (uid 65534, by setpriv; this machine runs trials as root) tries to open and
// remove our segments, open our processes' descriptors through /proc, and reach our manager
// (other-uid-peer.ts); and it makes files of its own under the names a child of ours has,
// which our manager must leave alone when that child is SIGKILLed (issue 10, item 8).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as mp from '../../src/index.js';
import { managerDir, socketPath } from '../../src/sharing/manager/dir.js';
import { waitFor } from '../helpers/wait.js';
import { put } from './targets.js';
import { elementsOf, joinKilled, makeChannel, target, type Trial } from './trial-kit.js';

const PEER = fileURLToPath(new URL('./other-uid-peer.js', import.meta.url));
const NOBODY = 65534;

interface PeerReport {
  uid: number;
  managed: string[];
  refused: Record<string, number>;
  planted: string[];
}

function runPeer(attack: object): Promise<PeerReport> {
  return new Promise((resolve, reject) => {
    const c = spawn(
      'setpriv',
      [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', process.execPath, PEER, JSON.stringify(attack)],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    c.stdout.on('data', (b: Buffer) => void (out += b));
    c.stderr.on('data', (b: Buffer) => void (err += b));
    c.on('error', reject);
    c.on('exit', (code) => {
      try {
        resolve(JSON.parse(out) as PeerReport);
      } catch {
        reject(new Error(`the peer ended with ${code}: ${err.slice(-500)}`));
      }
    });
  });
}

export async function otherUid(t: Trial): Promise<void> {
  const p = t.p;
  if (process.getuid!() !== 0 || spawnSync('setpriv', ['--version']).status !== 0) {
    t.stats.skipped = 'needs root and setpriv';
    return;
  }
  const fs = p.strategy === 'file_system';
  const ch = makeChannel(p);
  const out = new mp.SimpleQueue<{ own: string[] }>();
  const n = Math.max(1, p.hold);
  const child = mp.spawn(target('holdAndMake'), { args: [ch.consumerEnd, out, n], join: false });
  const childPid = child.pids()[0]!;
  t.phase('started', { holder: child.pids() });
  const mine: mp.Tensor[] = [];
  let planted: string[] = [];
  try {
    for (let k = 0; k < n; k++) {
      const x = mp.full([elementsOf(p)], k, { dtype: 'int32', shared: true });
      mine.push(x);
      await put(ch.producerEnd, x);
    }
    const { own } = await out.get();
    const names = readdirSync('/dev/shm').filter(
      (name) => name.startsWith(`tensorproc_${process.pid}_`) || name.startsWith(`tensorproc_${childPid}_`),
    );
    if (fs && names.length === 0) t.fail('error', 'no segment of ours in /dev/shm to attack');
    t.phase(`the peer attacks ${names.length} names, 2 processes${fs ? ', the manager' : ''}`);
    const socket = fs ? socketPath(managerDir()) : null;
    if (socket !== null && !existsSync(socket)) t.fail('error', `no manager socket at ${socket} to attack`);
    const r = await runPeer({ names, pids: [process.pid, childPid], socket, plant: fs ? [childPid] : [] });
    planted = r.planted;
    if (r.uid !== NOBODY) t.fail('error', `the peer ran as uid ${r.uid}`);
    for (const m of r.managed) t.fail('other-uid', `uid ${NOBODY} ${m}`);
    t.stats.refused = r.refused;
    t.phase('killing the holder');
    process.kill(childPid, 'SIGKILL');
    await joinKilled(t, child, 'holder');
    if (fs) {
      // Its own segment going shows the manager has judged its death, planted names included.
      try {
        await waitFor(() => own.every((name) => !existsSync(`/dev/shm/${name}`)), 5000);
      } catch {
        t.fail('shm-left', `the killed holder's own names were not removed: ${own.join(' ')}`);
      }
      for (const name of planted) {
        const st = lstatSync(`/dev/shm/${name}`, { throwIfNoEntry: false });
        if (st === undefined || st.uid !== NOBODY)
          t.fail('removed-foreign', `our manager removed /dev/shm/${name} of uid ${NOBODY} when pid ${childPid} died`);
      }
    }
  } finally {
    for (const name of planted) rmSync(`/dev/shm/${name}`, { force: true });
    for (const x of mine) x.release();
    ch.close();
    out.close();
  }
}
