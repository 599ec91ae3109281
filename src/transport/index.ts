// The transport: values (with tensors, queues… anywhere inside) as framed datagrams.
import './reductions.js';
import './file-reductions.js';
export { encodeMessage, decodeMessage, checkMessage, INLINE_MAX, MAX_FRAME, MAX_FDS, FRAME_VERSION } from './frame.js';
export type { Frame } from './frame.js';
export { registerReduction } from './registry.js';
export type { Reduction, ReduceContext, RebuildContext } from './registry.js';
export { prepare } from './walk.js';
export { transportAddon } from './native.js';
export { Endpoint, NOTHING } from './endpoint.js';
export { keepFrame } from './send-backlog.js';
export { checkTimeout, timeoutOption } from './timeouts.js';
export { settled } from '../event-loop.js';
export type { KeptFrame } from './send-backlog.js';
export { Watcher } from './watcher.js';
