// Sharing strategies, selected as in torch.multiprocessing.
import { InvalidStrategyError } from '../errors.js';
import { managerClient } from './manager/client.js';
import { ENV, envString, type EnvName } from '../env.js';

export type SharingStrategy = 'file_descriptor' | 'file_system';

const ALL: readonly SharingStrategy[] = ['file_descriptor', 'file_system'];

/** The environment variable that overrides the default strategy, in children too. */
export const STRATEGY_ENV = 'TENSORPROC_SHARING_STRATEGY' satisfies EnvName;

function check(name: unknown, source: string): SharingStrategy {
  if (typeof name === 'string' && (ALL as readonly string[]).includes(name)) return name as SharingStrategy;
  throw new InvalidStrategyError(
    `${source} ${JSON.stringify(name)} is not a sharing strategy. Valid names: ${ALL.map((s) => `'${s}'`).join(', ')}.`,
  );
}

let current: SharingStrategy | null = null;

export function getAllSharingStrategies(): Set<SharingStrategy> {
  return new Set(ALL);
}

export function getSharingStrategy(): SharingStrategy {
  if (current === null) {
    const env = envString(STRATEGY_ENV);
    current = env === undefined ? ENV.TENSORPROC_SHARING_STRATEGY.default : check(env, `${STRATEGY_ENV}=`);
  }
  return current;
}

export function setSharingStrategy(name: SharingStrategy): void {
  current = check(name, 'Sharing strategy');
  // A process that chooses file_system will share through the manager soon: start it now.
  if (current === 'file_system') managerClient.prestart();
}
