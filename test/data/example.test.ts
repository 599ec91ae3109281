// The seed's evaluation program (examples/evaluate.ts) on a small config: it runs end to end
// and prints the seed's table; a bad config is a clear error and a non-zero exit.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { configFrom, run } from '../../examples/evaluate.js';
import { ConfigError } from '../../examples/keypoints/config.js';
import { formatNameValue } from '../../examples/keypoints/evaluate.js';
import { checkLeaks } from '../helpers/leaks.js';

checkLeaks();

const cfgFile = fileURLToPath(new URL('../../../examples/configs/keypoints.yaml', import.meta.url));
const program = fileURLToPath(new URL('../../examples/evaluate.js', import.meta.url));
const small = ['DATASET.NUM_IMAGES', '24', 'DATASET.INPUT_SIZE', '64', 'TEST.LOG_PROGRESS', 'false', 'PRINT_FREQ', '10'];

describe('examples/evaluate', () => {
  test("runs on a small config: every image evaluated, the seed's table printed, accuracy well above chance", async () => {
    const lines: string[] = [];
    const cfg = configFrom(['--cfg', cfgFile, ...small, 'WORKERS', '2']);
    assert.equal(cfg.DATASET.NUM_IMAGES, 24);
    const out = await run(cfg, (l) => lines.push(l));
    assert.equal(out.images, 24);
    assert.deepEqual(
      lines.filter((l) => l.startsWith('finish images')),
      ['finish images: 0', 'finish images: 10', 'finish images: 20'],
    );
    const [head, rule, row] = out.table;
    assert.equal(head, '| Arch | AP | Ap .5 | AP .75 | AR | AR .5 | PCK@0.1 | Err (px) |');
    assert.equal(rule, '|---|---|---|---|---|---|---|---|');
    assert.match(row!, /^\| pose_mat\.\.\. (\| \d+\.\d{3} ){7}\|$/);
    assert.ok(out.nameValue['PCK@0.1']! > 0.5, `PCK ${out.nameValue['PCK@0.1']}`);
    assert.ok(lines.includes(row!));
  });

  test('_print_name_value: names over 15 characters are shortened to 8 and "..."', () => {
    assert.deepEqual(formatNameValue({ AP: 0.5, AR: 0.25 }, 'short_name'), [
      '| Arch | AP | AR |',
      '|---|---|---|',
      '| short_name | 0.500 | 0.250 |',
    ]);
    assert.equal(formatNameValue({ AP: 1 }, 'exactly_15_char')[2], '| exactly_15_char | 1.000 |');
    assert.equal(formatNameValue({ AP: 1 }, 'sixteen_chars_xx')[2], '| sixteen_... | 1.000 |');
  });

  test('bad configs are ConfigErrors naming the key; the program exits 2 with the message', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tp-example-'));
    try {
      const bad = (argv: string[], re: RegExp) =>
        assert.throws(
          () => configFrom(argv),
          (e: unknown) => e instanceof ConfigError && re.test(e.message),
        );
      bad([], /--cfg is required/);
      bad(['--cfg', join(dir, 'missing.yaml')], /cannot read the config file/);
      bad(['--cfg', cfgFile, 'MODEL.DEPTH', '3'], /non-existent config key: MODEL.DEPTH/);
      bad(['--cfg', cfgFile, 'WORKERS', 'two'], /type mismatch \(number vs. string\).*WORKERS/);
      bad(['--cfg', cfgFile, 'TEST.FLIP_TEST'], /KEY VALUE pairs/);
      bad(['--cfg', cfgFile, 'DATASET.INPUT_SIZE', '66'], /multiple of 4/);
      bad(['--cfg', cfgFile, 'TEST.SCALE_FACTOR', '[]'], /SCALE_FACTOR/);
      bad(['--cfg', cfgFile, 'MODEL', '3'], /MODEL is a section/);
      bad(['--cfg', cfgFile, '--bogus'], /Unknown option/);
      const yaml = join(dir, 'bad.yaml');
      writeFileSync(yaml, 'MODEL:\n  NUM_JOINTS: [1\n');
      bad(['--cfg', yaml], /not valid YAML/);
      writeFileSync(yaml, 'TEST:\n  BATCH_SIZE: 0\n');
      bad(['--cfg', yaml], /TEST.BATCH_SIZE must be an integer >= 1/);
      const arch = join(dir, 'arch.json');
      writeFileSync(arch, JSON.stringify({ img_size: 96 }));
      assert.equal(configFrom(['--cfg', cfgFile, '--superconfig', arch]).DATASET.INPUT_SIZE, 96);
      const r = spawnSync(process.execPath, [program, '--cfg', cfgFile, 'WORKERS', '-1'], { encoding: 'utf8' });
      assert.equal(r.status, 2);
      assert.match(r.stderr, /WORKERS must be an integer >= 0/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
