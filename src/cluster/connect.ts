// One NATS connection, for a head (a cluster Pool, a cluster Queue) or an agent, from the
// `cluster` options (docs/cluster.md): servers, credentials (user/password, a token, an nkey
// seed file, or all in the URL as nats://user:pass@host:4222) and TLS.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { connect, nkeyAuthenticator, type NatsConnection, type NodeConnectionOptions } from '@nats-io/transport-node';
import * as mp from '../index.js';
import { envString } from '../env.js';

export type ClusterOptions = mp.ClusterOptions;

export function serverList(servers: string | readonly string[]): string[] {
  const list = typeof servers === 'string' ? servers.split(',') : [...servers];
  if (list.length === 0 || list.some((s) => typeof s !== 'string' || s.trim() === ''))
    throw new mp.InvalidArgumentError(
      `cluster.servers must be a NATS URL or a list of them, e.g. 'nats://127.0.0.1:4222' (got ${JSON.stringify(servers)}).`,
    );
  return list.map((s) => s.trim());
}

/** This host's id: the option, else TENSORPROC_HOST_ID, else the host name; made safe for a subject. */
export function hostId(given?: string): string {
  const id = given ?? envString('TENSORPROC_HOST_ID') ?? hostname();
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(id))
    throw new mp.InvalidArgumentError(
      `A host id is 1-64 letters, digits, '_' or '-' (got ${JSON.stringify(id)}): set --host-id or TENSORPROC_HOST_ID.`,
    );
  return id;
}

export async function connectCluster(
  o: Omit<ClusterOptions, 'servers'> & { servers: string | readonly string[]; name?: string },
): Promise<NatsConnection> {
  // nats://user:pass@host:4222: the credentials are taken out of the URLs (the client does not read them there).
  let { user, pass } = o;
  const servers = serverList(o.servers).map((s) => {
    const m = /^([a-z]+:\/\/)([^:@/]+)(?::([^@/]*))?@(.*)$/i.exec(s);
    if (!m) return s;
    user ??= decodeURIComponent(m[2]!);
    if (m[3] !== undefined) pass ??= decodeURIComponent(m[3]);
    return `${m[1]}${m[4]}`;
  });
  const opts: NodeConnectionOptions = {
    servers,
    name: o.name ?? 'tensorproc',
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    pingInterval: 2000,
  };
  if (user !== undefined) opts.user = user;
  if (pass !== undefined) opts.pass = pass;
  if (o.token !== undefined) opts.token = o.token;
  if (o.nkeyFile !== undefined) opts.authenticator = nkeyAuthenticator(new TextEncoder().encode(readFileSync(o.nkeyFile, 'utf8').trim()));
  if (o.tls === true) opts.tls = {};
  else if (o.tls && typeof o.tls === 'object') opts.tls = { caFile: o.tls.ca, certFile: o.tls.cert, keyFile: o.tls.key };
  try {
    return await connect(opts);
  } catch (e) {
    throw new mp.ClusterUnavailableError(
      `No NATS server answers at ${servers.join(',')}: start one (nats-server -a 127.0.0.1 -p 4222), or check the URL and credentials (${(e as Error).message}).`,
      { cause: e },
    );
  }
}
