#!/usr/bin/env node
// The tensorproc command line: `npx tensorproc <command>`.
// Commands are imported when run: `doctor` must report a missing addon, not die of it.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const USAGE = `usage: tensorproc <command>

  bench [name..]  the yardstick, side by side with the anchors when they are found (alloc,
                  messages, spawn, queue; all by default), printed as markdown tables
  doctor          what this machine allows: strategies, /dev/shm, memory, open-file limit, addon
  shm ls          this user's named segments in /dev/shm, their holders, and which are orphaned
  shm clean       remove the orphaned ones (every holder dead); --all removes every one of yours
`;

async function main(argv: string[]): Promise<number> {
  const [cmd, sub, ...rest] = argv;
  if (cmd === 'bench') {
    // Each bench runs in a process of its own (bench/run.ts); they ship in dist/bench.
    const runner = fileURLToPath(new URL('../../bench/run.js', import.meta.url));
    if (!existsSync(runner)) {
      process.stderr.write(`tensorproc: the benches are not in this installation (looked for ${runner}).\n`);
      return 1;
    }
    const r = spawnSync(process.execPath, [runner, ...argv.slice(1)], { stdio: 'inherit' });
    return r.status ?? 1;
  }
  if (cmd === 'doctor') {
    const { doctor } = await import('./doctor.js');
    const checks = await doctor();
    for (const c of checks) console.log(`${c.ok ? 'ok  ' : 'FAIL'}  ${c.name.padEnd(26)} ${c.detail}`);
    return checks.every((c) => c.ok) ? 0 : 1;
  }
  if (cmd === 'shm' && sub === 'ls') {
    const { listSegments } = await import('./shm.js');
    const segs = listSegments();
    if (segs.length === 0) console.log('no tensorproc segments in /dev/shm');
    for (const s of segs) {
      const hs = s.holders.map((h) => `${h.pid}${h.alive ? '' : ' (dead)'}×${h.count}`).join(', ') || 'none';
      console.log(`${s.name}  ${s.bytes} B  creator ${s.creatorPid}  refs ${s.refs ?? '?'}  holders ${hs}${s.orphaned ? '  ORPHANED' : ''}`);
    }
    return 0;
  }
  if (cmd === 'shm' && sub === 'clean') {
    const { cleanSegments } = await import('./shm.js');
    const removed = cleanSegments(rest.includes('--all'));
    console.log(removed.length ? `removed ${removed.length}: ${removed.join(' ')}` : 'nothing to remove');
    return 0;
  }
  process.stderr.write(USAGE);
  return cmd === undefined || cmd === 'help' || cmd === '--help' ? 0 : 2;
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (e: Error) => {
    // A coded error (the addon did not load, for one) is reported as what to do, not as a stack.
    process.stderr.write(`tensorproc: ${e.message}\n`);
    process.exitCode = 1;
  },
);
