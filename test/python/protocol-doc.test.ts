// docs/protocol.md's constants, checked against both sides that speak it: Node's sources and
// the Python package (python/tensorproc). A change on either side that the page does not
// follow fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import * as wire from '../../src/transport/wire.js';
import * as plain from '../../src/transport/plain-layout.js';
import * as header from '../../src/sharing/segment-header.js';
import { COUNT, NOTICED, WAITERS } from '../../src/queue/slots.js';
import { SENT } from '../../src/queue/spin.js';
import { noPython, python, pythonEnv, repo } from './python-peer.js';

const page = readFileSync(`${repo}docs/protocol.md`, 'utf8');
const block = /## Constants[\s\S]*?```json\n([\s\S]*?)```/.exec(page);
const doc = JSON.parse(block![1]!) as Record<string, unknown>;

test("docs/protocol.md's constants are Node's", () => {
  const node = {
    FRAME_VERSION: wire.FRAME_VERSION,
    KIND_VALUE: wire.KIND_VALUE,
    KIND_TENSOR: wire.KIND_TENSOR,
    KIND_SPILL: wire.KIND_SPILL,
    KIND_PLAIN: wire.KIND_PLAIN,
    INLINE_MAX: wire.INLINE_MAX,
    MAX_FRAME: wire.MAX_FRAME,
    MAX_FDS: wire.MAX_FDS,
    MAX_NDIM: wire.MAX_NDIM,
    PIECE_ALIGN: wire.PIECE_ALIGN,
    MAX_NODES: plain.MAX_NODES,
    MAX_DEPTH: plain.MAX_DEPTH,
    MAX_ITEMS: plain.MAX_ITEMS,
    DTYPES: [...wire.DTYPE_CODES],
    STRATEGIES: [...wire.STRATEGIES],
    HEADER_BYTES: header.HEADER_BYTES,
    MAGIC: header.MAGIC,
    HEADER_VERSION: header.VERSION,
    SLOTS: header.SLOTS,
    W_REFS: header.W_REFS,
    W_WAITING: header.W_WAITING,
    W_SLOTS_USED: header.W_SLOTS_USED,
    QUEUE_WORDS: { COUNT, WAITERS, NOTICED, SENT },
    // event.ts keeps its word indices to itself: read from its source.
    EVENT_WORDS: doc.EVENT_WORDS,
  };
  assert.deepEqual(node, doc);
  const event = readFileSync(`${repo}src/queue/event.ts`, 'utf8');
  for (const [k, v] of Object.entries(doc.EVENT_WORDS as Record<string, number>)) assert.match(event, new RegExp(`const ${k} = ${v};`));
});

test("docs/protocol.md's constants are the Python package's", { skip: noPython }, () => {
  const code = `
import json, tensorproc._frames as F, tensorproc._header as H, tensorproc._channels as C
print(json.dumps({
 "FRAME_VERSION": F.FRAME_VERSION, "KIND_VALUE": F.KIND_VALUE, "KIND_TENSOR": F.KIND_TENSOR,
 "KIND_SPILL": F.KIND_SPILL, "KIND_PLAIN": F.KIND_PLAIN, "INLINE_MAX": F.INLINE_MAX,
 "MAX_FRAME": F.MAX_FRAME, "MAX_FDS": F.MAX_FDS, "MAX_NDIM": F.MAX_NDIM, "PIECE_ALIGN": F.PIECE_ALIGN,
 "MAX_NODES": F.MAX_NODES, "MAX_DEPTH": F.MAX_DEPTH, "MAX_ITEMS": F.MAX_ITEMS,
 "DTYPES": list(F.DTYPES), "STRATEGIES": list(F.STRATEGIES), "HEADER_BYTES": H.HEADER_BYTES,
 "MAGIC": H.MAGIC, "HEADER_VERSION": H.VERSION, "SLOTS": H.SLOTS, "W_REFS": H.W_REFS,
 "W_WAITING": H.W_WAITING, "W_SLOTS_USED": H.W_SLOTS_USED,
 "QUEUE_WORDS": {"COUNT": C.COUNT, "WAITERS": C.WAITERS, "NOTICED": C.NOTICED, "SENT": C.SENT},
 "EVENT_WORDS": {"FLAG": C.FLAG, "WAITERS": C.E_WAITERS, "SETS": C.SETS}}))`;
  const r = spawnSync(python!, ['-c', code], { encoding: 'utf8', env: pythonEnv('file_descriptor') });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), doc);
});
