// What every trial of the fault campaign uses (NOTE [Fault trials] in plan.ts): the trial's
// record of phases and failures, its channel, and joining children with what is expected.
import * as mp from '../../src/index.js';
import type { Params } from './plan.js';
import type { Channel, ConsumerReport } from './targets.js';

const targets = new URL('./targets.js', import.meta.url);
export const target = (name: string) => ({ module: targets, export: name });

export interface Failure {
  kind: string;
  detail: string;
}

export class Trial {
  readonly failures: Failure[] = [];
  readonly stats: Record<string, unknown> = {};
  constructor(readonly p: Params) {}
  phase(phase: string, pids?: Record<string, number[]>): void {
    process.stdout.write(`${JSON.stringify({ phase, ...(pids ? { pids } : {}) })}\n`);
  }
  fail(kind: string, detail: string): void {
    this.failures.push({ kind, detail });
  }
  /** The kill's moment: `delayMs` after the first message (when fromFlow) or after now. */
  async killPoint(flowing: mp.Event): Promise<void> {
    if (this.p.fromFlow && !(await flowing.wait(20_000))) this.fail('no-flow', 'no message arrived within 20 s');
    await new Promise((r) => setTimeout(r, this.p.delayMs));
  }
}

export const elementsOf = (p: Params): number => p.bytes / 4;

/** The two ends children use, and what the parent keeps. */
export function makeChannel(p: Params): { producerEnd: Channel; consumerEnd: Channel; close(): void } {
  if (p.channel === 'Pipe') {
    const [a, b] = mp.Pipe<unknown>();
    return { producerEnd: a, consumerEnd: b, close: () => (a.close(), b.close()) };
  }
  const q = p.channel === 'Queue' ? new mp.Queue<unknown>({ maxsize: p.maxsize }) : new mp.SimpleQueue<unknown>();
  return { producerEnd: q, consumerEnd: q, close: () => q.close() };
}

/** Joins `ctx` expecting a SIGKILL; anything else is a failure. */
export async function joinKilled(t: Trial, ctx: mp.ProcessContext, who: string): Promise<void> {
  try {
    await ctx.join();
    t.fail('wrong-exit', `${who} was killed but joined cleanly`);
  } catch (e) {
    if (!(e instanceof mp.ProcessExitedException) || e.signalName !== 'SIGKILL') t.fail('wrong-exit', `${who}: ${String(e)}`);
  }
}

export async function joinClean(t: Trial, ctx: mp.ProcessContext, who: string): Promise<void> {
  try {
    if ((await ctx.join()) !== true) t.fail('wrong-exit', `${who} did not exit`);
  } catch (e) {
    t.fail('child-failed', `${who}: ${String(e).slice(0, 500)}`);
  }
}

export function checkReport(t: Trial, r: ConsumerReport): void {
  for (const pr of r.problems)
    t.fail(
      pr.startsWith('get:') ? 'get-error' : pr.includes(' after ') ? 'duplicate-or-order' : 'corrupt',
      `consumer ${r.consumer}: ${pr}`,
    );
}
