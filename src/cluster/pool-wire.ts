// The head's side of the wire (NOTE [Cluster pool]): targets as agents resolve them, chunks
// out to an agent's job subject, and what comes back on the head's subject.
import { createRequire } from 'node:module';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { NatsConnection } from '@nats-io/transport-node';
import * as mp from '../index.js';
import { Receiver, Sender } from './codec.js';
import { headSubject, jobSubject, type ToAgent, type ToHead, type WireTarget } from './protocol.js';

/** A target as agents resolve it: a path under the code root, or a package specifier. */
export function wireTarget(root: string, t: mp.Target): WireTarget {
  if (t === null || typeof t !== 'object' || !(typeof t.module === 'string' || t.module instanceof URL))
    throw new mp.InvalidArgumentError("A cluster Pool's target is { module, export }, its module under cluster.root (docs/cluster.md).");
  const exp = t.export ?? 'default';
  const m = t.module instanceof URL ? t.module.href : t.module;
  let file: string | null = null;
  if (m.startsWith('file:')) file = fileURLToPath(m);
  else if (isAbsolute(m)) file = m;
  else if (m.startsWith('.') || /\.[cm]?js$/.test(m)) file = resolve(root, m);
  if (file === null) return { path: null, specifier: m, export: exp };
  const rel = relative(root, file);
  if (rel.startsWith('..') || isAbsolute(rel))
    throw new mp.InvalidArgumentError(
      `The target ${m} is not under the cluster's code root ${root}: agents find modules under their --root (set cluster.root).`,
    );
  return { path: rel.split(sep).join('/'), specifier: null, export: exp };
}

/**
 * A wire target as this host's agent would resolve it, for the head's own workers (NOTE
 * [Same-host slots]): a path under `root` as a file: URL; a package from `root`, as the
 * agent (whose working directory is its root) finds it.
 */
export function targetHere(root: string, w: WireTarget): { module: string; export: string } {
  if (w.path !== null) return { module: pathToFileURL(join(root, w.path)).href, export: w.export };
  const spec = w.specifier ?? '';
  try {
    return { module: pathToFileURL(createRequire(join(root, 'noop.js')).resolve(spec)).href, export: w.export };
  } catch {
    return { module: spec, export: w.export }; // the Pool says what is wrong with it
  }
}

/** The head's NATS traffic with its agents: one sender out, one subscription in. */
export class HeadWire {
  readonly #job: string;
  readonly #send: Sender;

  constructor(nc: NatsConnection, job: string, onMessage: (m: ToHead) => void) {
    this.#job = job;
    this.#send = new Sender(nc);
    const receiver = new Receiver();
    nc.subscribe(headSubject(job), {
      callback: (_e, m) => {
        const got = receiver.take(m);
        if (got) onMessage(got.value as ToHead);
      },
    });
  }

  send(host: string, m: ToAgent): void {
    this.#send.send(jobSubject(host, this.#job), m);
  }
}
