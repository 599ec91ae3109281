// The room check's budget (NOTE [Room budget], src/sharing/room.ts): a reading serves the
// checks after it while young and while this thread's segments leave half of its room, and
// anything that might not fit is checked against a fresh reading.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { checkLeaks } from '../helpers/leaks.js';
import { isCoded } from '../helpers/errors.js';
import { ShmFullError } from '../../src/index.js';
import { READING_MS, checkRoom, roomReadings } from '../../src/sharing/room.js';

checkLeaks();
const MiB = 2 ** 20;

/** Readings taken by `fn`. */
function readingsOf(fn: () => void): number {
  const before = roomReadings();
  fn();
  return roomReadings() - before;
}

test('1 MiB checks in a row share a reading; below 1 MiB none is taken', () => {
  assert.equal(
    readingsOf(() => checkRoom('file_descriptor', MiB - 1)),
    0,
  );
  // A reading older than READING_MS is taken again, so a pair may straddle that: one of a few
  // pairs checked back to back shares one.
  let shared = false;
  for (let k = 0; k < 10 && !shared; k++) {
    shared =
      readingsOf(() => {
        checkRoom('file_descriptor', MiB);
        checkRoom('file_descriptor', MiB);
      }) <= 1;
  }
  assert.ok(shared, 'two 1 MiB checks back to back took a reading each, ten times over');
});

test('what might not fit is checked against a fresh reading: beyond memory, past half the room, a first file_system check, an old reading', async () => {
  checkRoom('file_descriptor', MiB);
  // Beyond any machine: refused each time, each time read afresh.
  for (let k = 0; k < 3; k++) {
    assert.equal(
      readingsOf(() => assert.throws(() => checkRoom('file_descriptor', 2 ** 52), isCoded(ShmFullError, 'ERR_TP_SHM_FULL'))),
      1,
    );
  }
  // Over half of what is available (the machine's; a cgroup may allow less, then it is refused): read.
  const avail = Number(/^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'latin1'))![1]) * 1024;
  checkRoom('file_descriptor', MiB);
  assert.equal(
    readingsOf(() => {
      try {
        checkRoom('file_descriptor', Math.ceil(avail * 0.6));
      } catch (e) {
        assert.ok(e instanceof ShmFullError, String(e));
      }
    }),
    1,
  );
  // A file_descriptor reading does not know /dev/shm: the first file_system check reads.
  checkRoom('file_descriptor', MiB);
  assert.equal(
    readingsOf(() => checkRoom('file_system', MiB)),
    1,
  );
  // An old reading is not used.
  checkRoom('file_descriptor', MiB);
  await sleep(READING_MS + 10);
  assert.equal(
    readingsOf(() => checkRoom('file_descriptor', MiB)),
    1,
  );
});
