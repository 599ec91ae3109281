// The seed's evaluation program (a pose network's test script) in TypeScript: a multi-worker
// DataLoader over images made on the fly, a model step per image (multi-scale heatmaps with
// the flip test, peak finding), a progress bar, accuracy against the known keypoints, and
// the markdown table of _print_name_value at the end.
//
//   node dist/examples/evaluate.js --cfg examples/configs/keypoints.yaml [KEY VALUE ...]
//   e.g. ... WORKERS 0 TEST.FLIP_TEST false TEST.SCALE_FACTOR "[1]"
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import * as mp from 'tensorproc';
import { ConfigError, STRIDE, check, loadConfig, type Config } from './keypoints/config.js';
import { evaluate, findPeaks, formatNameValue, type Result } from './keypoints/evaluate.js';
import { multiScaleHeatmaps } from './keypoints/model.js';
import { progress } from './progress.js';

const USAGE = `usage: evaluate --cfg FILE [--superconfig FILE] [KEY VALUE ...]

  --cfg FILE          experiment config (YAML), required
  --superconfig FILE  fixed arch (JSON) whose img_size sets DATASET.INPUT_SIZE
  KEY VALUE           override a config key, e.g. WORKERS 0 TEST.FLIP_TEST false`;

interface Batch {
  image: mp.Tensor;
  keypoints: mp.Tensor;
  area: mp.Tensor;
  index: mp.Tensor;
}

/** The seed's parse_args + update_config + check_config. Throws ConfigError on bad input. */
export function configFrom(argv: readonly string[]): Config {
  // As argparse.REMAINDER: from the first word that is not an option (or its value), the
  // rest are KEY VALUE overrides, values like -1 included.
  let split = 0;
  while (split < argv.length && argv[split]!.startsWith('-'))
    split += argv[split]!.includes('=') || /^(-h|--help)$/.test(argv[split]!) ? 1 : 2;
  let parsed;
  try {
    parsed = parseArgs({
      args: argv.slice(0, split),
      options: { cfg: { type: 'string' }, superconfig: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
    });
  } catch (e) {
    throw new ConfigError(`${(e as Error).message}\n\n${USAGE}`);
  }
  if (parsed.values.help) throw new ConfigError(USAGE);
  if (parsed.values.cfg === undefined) throw new ConfigError(`the argument --cfg is required\n\n${USAGE}`);
  const cfg = loadConfig(parsed.values.cfg, argv.slice(split));
  if (parsed.values.superconfig !== undefined) {
    // As the seed: the fixed arch's resolution overrides the input size.
    let arch: { img_size?: unknown };
    try {
      arch = JSON.parse(readFileSync(parsed.values.superconfig, 'utf8'));
    } catch (e) {
      throw new ConfigError(`cannot read the superconfig ${parsed.values.superconfig}: ${(e as Error).message}`);
    }
    if (typeof arch.img_size !== 'number') throw new ConfigError(`${parsed.values.superconfig} has no numeric img_size`);
    cfg.DATASET.INPUT_SIZE = arch.img_size;
    check(cfg);
  }
  return cfg;
}

export interface Outcome {
  nameValue: Record<string, number>;
  table: string[];
  images: number;
  seconds: number;
  waitSeconds: number;
}

/** Runs the evaluation of `cfg`, printing as the seed does; `log` takes each line. */
export async function run(cfg: Config, log: (line: string) => void = console.log): Promise<Outcome> {
  log(`=> config ${JSON.stringify(cfg)}`);
  const dataset = { module: new URL('./keypoints/dataset.js', import.meta.url), export: 'makeKeypointDataset', args: [cfg] };
  await using loader = new mp.DataLoader<Batch>(dataset, { batchSize: cfg.TEST.BATCH_SIZE, numWorkers: cfg.WORKERS });
  await loader.ready();
  const total = loader.dataset.length as number;
  const bar = cfg.TEST.LOG_PROGRESS
    ? progress('evaluating |{bar}| {value}/{total} images  {rate} img/s  eta {eta_formatted}', total, { rate: '-' })
    : null;
  const say = (line: string): void => (bar ? bar.log(line) : log(line));
  const joints = cfg.MODEL.NUM_JOINTS;
  const side = cfg.DATASET.INPUT_SIZE / STRIDE;
  const results: Result[] = [];
  const t0 = performance.now();
  let waited = 0;
  let mark = performance.now();
  for await (const b of loader) {
    using batch = b as Batch & Disposable;
    waited += performance.now() - mark;
    for (let k = 0; k < batch.index.shape[0]!; k++) {
      const i = batch.index.get(k) as number;
      const heat = multiScaleHeatmaps(batch.image.select(0, k).data as Float32Array, cfg);
      const { preds, score } = findPeaks(heat, joints, side);
      results.push({
        preds,
        score,
        truth: batch.keypoints.select(0, k).contiguous().data.slice() as Float32Array,
        area: batch.area.get(k) as number,
      });
      if (i % cfg.PRINT_FREQ === 0) say(`finish images: ${i}`);
      bar?.increment({ rate: (results.length / ((performance.now() - t0) / 1000)).toFixed(0) });
    }
    mark = performance.now();
  }
  bar?.stop();
  const seconds = (performance.now() - t0) / 1000;
  const nameValue = evaluate(results, joints, cfg.DATASET.OKS_SIGMA);
  const table = formatNameValue(nameValue, cfg.MODEL.NAME);
  for (const line of table) log(line);
  log(
    `=> ${results.length} images in ${seconds.toFixed(2)} s with ${cfg.WORKERS} loader workers; the model waited ${(waited / 1000).toFixed(2)} s for batches`,
  );
  return { nameValue, table, images: results.length, seconds, waitSeconds: waited / 1000 };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  let cfg: Config | undefined;
  try {
    cfg = configFrom(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    console.error(e.message);
    process.exitCode = 2;
  }
  if (cfg) await run(cfg);
}
