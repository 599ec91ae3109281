#!/usr/bin/env node
// The tensorproc command line: `npx tensorproc <command>`, parsed by commander (every
// command's --help; a bad command, flag or value prints the usage and exits 2).
// Commands are imported when run: `doctor` must report a missing addon, not die of it, and
// `--help` needs none of them.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { BenchNotInstalledError } from './errors.js';
import { exitQuietlyOnClosedPipe } from './closed-pipe.js';

exitQuietlyOnClosedPipe(); // NOTE [Closed pipe]

/** Usage errors (a bad command, flag or value), as getopt programs exit. */
const EXIT_USAGE = 2;

const program = new Command('tensorproc')
  .description('torch.multiprocessing for Node.js: tensors in shared memory across processes and threads')
  .version(packageVersion(), '-V, --version', 'print the version of tensorproc')
  .showHelpAfterError()
  .exitOverride();

const bench = program
  .command('bench')
  .description(
    'the yardstick (W1-W4 of YARDSTICK.md), side by side with every anchor this machine has (torch, child_process, worker_threads, piscina), then tables of ratios and verdicts',
  )
  .option('--quick', 'short counts: a smoke run of every workload in about a minute')
  .option('--json', 'print only the measurements, one JSON object a line, and a line for each thing not measured (no progress, no tables)')
  .addOption(
    new Option(
      '--only <ids>',
      'run only these workloads, comma-separated: W1,W2,W3,W3mixed,W4, or W5 (cluster), W6 (Python), alloc, messages, sync',
    ).argParser(parseOnly),
  )
  .addOption(
    new Option('--plot <file.svg>', "draw W1's messages/s against size, one line per implementation (needs vega and vega-lite)").argParser(
      parsePlot,
    ),
  )
  .addOption(new Option('--runs <n>', 'repeat every measurement n times, interleaved; tables show medians').default(1).argParser(parseRuns))
  .addHelpText(
    'after',
    '\nThe anchors run when their interpreter is found: torch with the first python3 on PATH (or\n/usr/bin/python3) that imports it, piscina when it is installed. Each workload runs in a\nprocess of its own; NOTE [Bench records] in bench/lib/record.ts says what --json prints.',
  )
  .action(async (opts: { quick?: boolean; json?: boolean; only?: string[]; plot?: string; runs: number }) => {
    const runner = fileURLToPath(new URL('../../bench/run.js', import.meta.url));
    if (!existsSync(runner)) throw new BenchNotInstalledError(`the benches are not in this installation (looked for ${runner})`);
    const { runBench, chooseWorkloads } = (await import(runner)) as typeof import('../../bench/run.js');
    try {
      chooseWorkloads(opts.only ?? null);
    } catch (e) {
      // The runner knows its workloads; a name it does not know is a usage error like any other.
      if ((e as Error & { code?: unknown }).code === 'ERR_TP_UNKNOWN_WORKLOAD')
        bench.error(`error: option '--only <ids>': ${(e as Error).message}`, { exitCode: EXIT_USAGE });
      throw e;
    }
    try {
      process.exitCode = await runBench({
        quick: opts.quick === true,
        json: opts.json === true,
        only: opts.only ?? null,
        plot: opts.plot ?? null,
        runs: opts.runs,
      });
    } catch (e) {
      if ((e as Error & { code?: unknown }).code === 'ERR_TP_PLOT_NEEDS_W1')
        bench.error(`error: ${(e as Error).message}`, { exitCode: EXIT_USAGE });
      throw e;
    }
  });

program
  .command('doctor')
  .description(
    'what this machine allows: strategies, /dev/shm, memory, open-file limit, manager directory, addon; warnings say how to fix what they find',
  )
  .action(async () => {
    const { doctor, formatCheck } = await import('./doctor.js');
    const checks = await doctor();
    for (const c of checks) console.log(formatCheck(c));
    process.exitCode = checks.some((c) => c.status === 'fail') ? 1 : 0;
  });

program
  .command('agent')
  .description(
    "join a cluster (docs/cluster.md): offer this host's worker slots to cluster Pools, run and watch their workers; runs until SIGINT or SIGTERM",
  )
  .requiredOption('--server <urls>', 'the NATS server(s), comma-separated: nats://HOST:4222 (nats://user:pass@HOST:4222 with credentials)')
  .addOption(new Option('--slots <n>', 'worker slots offered (default: the number of CPUs)').argParser(parseSlots))
  .option('--root <dir>', "where the pools' target modules are: the same code tree as on the heads (default: the current directory)")
  .option('--host-id <id>', "this host's id (default TENSORPROC_HOST_ID, then the host name); a head uses its own host's agent first")
  .option('--nkey-file <file>', 'a file holding an nkey seed, for servers configured with nkeys')
  .option('--tls-ca <file>', "the servers' CA certificate (turns TLS on)")
  .option('--tls-cert <file>', 'a client certificate, for servers that verify clients')
  .option('--tls-key <file>', "the client certificate's key")
  .action(
    async (opts: {
      server: string;
      slots?: number;
      root?: string;
      hostId?: string;
      nkeyFile?: string;
      tlsCa?: string;
      tlsCert?: string;
      tlsKey?: string;
    }) => {
      const { runAgent } = (await import(clusterEntry())) as typeof import('../cluster/index.js');
      const tls = opts.tlsCa || opts.tlsCert ? { ca: opts.tlsCa, cert: opts.tlsCert, key: opts.tlsKey } : undefined;
      await runAgent({
        servers: opts.server,
        slots: opts.slots,
        root: opts.root,
        hostId: opts.hostId,
        nkeyFile: opts.nkeyFile,
        tls,
        onReady: ({ host, slots }) => console.log(`tensorproc agent: host ${host}, ${slots} slots, server ${opts.server}: ready`),
        log: (line) => console.log(`tensorproc agent: ${line}`),
      });
    },
  );

/**
 * tensorproc/cluster as the package entry gives it (the bundle, beside which the workers run
 * the library that the targets import by name: NOTE [The package bundle]), else dist/src's.
 */
function clusterEntry(): string {
  const bundled = new URL('../../bundle/cluster/index.js', import.meta.url);
  return existsSync(bundled) ? bundled.href : new URL('../cluster/index.js', import.meta.url).href;
}

const shm = program.command('shm').description("this user's named (file_system) segments in /dev/shm");
shm
  .command('ls')
  .description('list them, their holders, and which are orphaned (every holder dead)')
  .action(async () => {
    const { listSegments } = await import('./shm.js');
    const segs = listSegments();
    if (segs.length === 0) console.log('no tensorproc segments in /dev/shm');
    for (const s of segs) {
      const hs = s.holders.map((h) => `${h.pid}${h.alive ? '' : ' (dead)'}×${h.count}`).join(', ') || 'none';
      console.log(
        `${s.name}  ${s.bytes} B  creator ${s.creatorPid}  refs ${s.refs ?? '?'}  holders ${hs}${s.orphaned ? '  ORPHANED' : ''}`,
      );
    }
  });
shm
  .command('clean')
  .description('remove the orphaned ones')
  .option('--all', 'remove every one of yours, orphaned or not')
  .action(async (opts: { all?: boolean }) => {
    const { cleanSegments } = await import('./shm.js');
    const removed = cleanSegments(opts.all === true);
    console.log(removed.length ? `removed ${removed.length}: ${removed.join(' ')}` : 'nothing to remove');
  });

function parseOnly(value: string): string[] {
  const ids = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (ids.length === 0) throw new InvalidArgumentError('name at least one workload: W1,W2,W3,W4, alloc, messages, sync');
  return ids;
}

function parsePlot(value: string): string {
  if (!/\.svg$/i.test(value)) throw new InvalidArgumentError('the plot is drawn as SVG: name a file ending in .svg');
  return value;
}

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

function parseSlots(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 4096) throw new InvalidArgumentError('a whole number from 1 to 4096');
  return n;
}

function parseRuns(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 100) throw new InvalidArgumentError('a whole number from 1 to 100');
  return n;
}

program.parseAsync(process.argv).catch((e: unknown) => {
  if (e instanceof CommanderError) {
    // commander has printed the error and the usage (or the help, asked for: exit 0).
    process.exitCode = e.exitCode === 0 ? 0 : EXIT_USAGE;
    return;
  }
  // A coded error (the addon did not load, for one) is reported as what to do, not as a stack.
  process.stderr.write(`tensorproc: ${(e as Error).message}\n`);
  process.exitCode = 1;
});
