// The evaluation's configuration, as the seed's (a yacs CfgNode): defaults, merged with a
// required YAML file, then with KEY VALUE overrides from the command line; unknown keys and
// values of the wrong type are refused with the key named, as yacs refuses them.
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

export interface Config {
  MODEL: { NAME: string; NUM_JOINTS: number; SIGMA: number; COLOR_TAU: number };
  DATASET: { NUM_IMAGES: number; INPUT_SIZE: number; SEED: number; NOISE: number; DISTRACTORS: number; OKS_SIGMA: number };
  WORKERS: number;
  PRINT_FREQ: number;
  TEST: { BATCH_SIZE: number; FLIP_TEST: boolean; SCALE_FACTOR: number[]; LOG_PROGRESS: boolean };
}

/** Output heatmaps are a quarter of the input's size, as the seed's networks make them. */
export const STRIDE = 4;
/** One colour per joint (NOTE [Colour-keyed joints] in model.ts), so at most this many joints. */
export const MAX_JOINTS = 8;

export function defaults(): Config {
  return {
    MODEL: { NAME: 'pose_matched_filter', NUM_JOINTS: 6, SIGMA: 1.5, COLOR_TAU: 0.35 },
    DATASET: { NUM_IMAGES: 256, INPUT_SIZE: 128, SEED: 2026, NOISE: 0.3, DISTRACTORS: 2, OKS_SIGMA: 0.05 },
    WORKERS: 2,
    PRINT_FREQ: 100,
    TEST: { BATCH_SIZE: 8, FLIP_TEST: true, SCALE_FACTOR: [1, 0.75], LOG_PROGRESS: true },
  };
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Node = Record<string, unknown>;

function typeName(v: unknown): string {
  return Array.isArray(v) ? 'list' : v === null ? 'null' : typeof v;
}

/** Sets `key` (dotted) to `value` in `cfg`, checking the key exists and the type matches the default's. */
function setKey(cfg: Node, key: string, value: unknown, where: string): void {
  const parts = key.split('.');
  let node: Node = cfg;
  for (let i = 0; i < parts.length - 1; i++) {
    const next = node[parts[i]!];
    if (next === null || typeof next !== 'object' || Array.isArray(next))
      throw new ConfigError(`${where}: non-existent config key: ${key}`);
    node = next as Node;
  }
  const leaf = parts[parts.length - 1]!;
  if (!Object.hasOwn(node, leaf)) throw new ConfigError(`${where}: non-existent config key: ${key}`);
  const old = node[leaf];
  if (old !== null && typeof old === 'object' && !Array.isArray(old)) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new ConfigError(`${where}: ${key} is a section (${Object.keys(old).join(', ')}), not a value`);
    }
    for (const [k, v] of Object.entries(value as Node)) setKey(cfg, `${key}.${k}`, v, where);
    return;
  }
  if (typeName(old) !== typeName(value)) {
    throw new ConfigError(
      `${where}: type mismatch (${typeName(old)} vs. ${typeName(value)}) with values (${JSON.stringify(old)} vs. ${JSON.stringify(value)}) for config key: ${key}`,
    );
  }
  node[leaf] = value;
}

/** Defaults, then the file, then the KEY VALUE pairs; then check(). */
export function loadConfig(file: string, opts: readonly string[]): Config {
  const cfg = defaults() as unknown as Node;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read the config file ${file}: ${(e as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (e) {
    throw new ConfigError(`${file} is not valid YAML: ${(e as Error).message}`);
  }
  if (doc !== null && doc !== undefined) {
    if (typeof doc !== 'object' || Array.isArray(doc))
      throw new ConfigError(`${file} must hold a mapping of config keys (MODEL:, DATASET:, TEST:, ...)`);
    for (const [k, v] of Object.entries(doc as Node)) setKey(cfg, k, v, file);
  }
  if (opts.length % 2 !== 0) throw new ConfigError(`overrides come in KEY VALUE pairs; got ${opts.length} words: ${opts.join(' ')}`);
  for (let i = 0; i < opts.length; i += 2) {
    let value: unknown;
    try {
      value = parse(opts[i + 1]!); // as yacs' literal_eval: 0.5, true, [1, 0.75], or a plain string
    } catch {
      value = opts[i + 1];
    }
    setKey(cfg, opts[i]!, value, 'command line');
  }
  return check(cfg as unknown as Config);
}

/** The seed's check_config: what the program cannot run with. */
export function check(cfg: Config): Config {
  const fail = (msg: string): never => {
    throw new ConfigError(msg);
  };
  const int = (v: number, key: string, min: number): void => {
    if (!Number.isInteger(v) || v < min) fail(`${key} must be an integer >= ${min} (got ${v})`);
  };
  int(cfg.MODEL.NUM_JOINTS, 'MODEL.NUM_JOINTS', 1);
  if (cfg.MODEL.NUM_JOINTS > MAX_JOINTS)
    fail(`MODEL.NUM_JOINTS must be at most ${MAX_JOINTS}: each joint has a colour of its own (got ${cfg.MODEL.NUM_JOINTS})`);
  if (!(cfg.MODEL.SIGMA > 0)) fail(`MODEL.SIGMA must be > 0 (got ${cfg.MODEL.SIGMA})`);
  if (!(cfg.MODEL.COLOR_TAU > 0)) fail(`MODEL.COLOR_TAU must be > 0 (got ${cfg.MODEL.COLOR_TAU})`);
  int(cfg.DATASET.NUM_IMAGES, 'DATASET.NUM_IMAGES', 1);
  int(cfg.DATASET.INPUT_SIZE, 'DATASET.INPUT_SIZE', 32);
  if (cfg.DATASET.INPUT_SIZE % STRIDE !== 0)
    fail(`DATASET.INPUT_SIZE must be a multiple of ${STRIDE}, the output stride (got ${cfg.DATASET.INPUT_SIZE})`);
  int(cfg.DATASET.SEED, 'DATASET.SEED', 0);
  int(cfg.DATASET.DISTRACTORS, 'DATASET.DISTRACTORS', 0);
  if (!(cfg.DATASET.NOISE >= 0)) fail(`DATASET.NOISE must be >= 0 (got ${cfg.DATASET.NOISE})`);
  if (!(cfg.DATASET.OKS_SIGMA > 0)) fail(`DATASET.OKS_SIGMA must be > 0 (got ${cfg.DATASET.OKS_SIGMA})`);
  int(cfg.WORKERS, 'WORKERS', 0);
  int(cfg.PRINT_FREQ, 'PRINT_FREQ', 1);
  int(cfg.TEST.BATCH_SIZE, 'TEST.BATCH_SIZE', 1);
  const scales = cfg.TEST.SCALE_FACTOR;
  if (scales.length === 0 || !scales.every((s) => typeof s === 'number' && s > 0 && s <= 2)) {
    fail(`TEST.SCALE_FACTOR must be a non-empty list of scales in (0, 2] (got ${JSON.stringify(scales)})`);
  }
  for (const s of scales) {
    if (Math.round(cfg.DATASET.INPUT_SIZE * s) < 2 * STRIDE) fail(`TEST.SCALE_FACTOR ${s} makes images of under ${2 * STRIDE} pixels`);
  }
  return cfg;
}
