export {
  addon,
  addonPath,
  fileLimit,
  EAGAIN,
  EMSGSIZE,
  RECV_EMPTY,
  RECV_PROBE,
  RECV_NO_PROBE,
  RECV_DROPS_SEEN,
  FDS_DROPPED,
  POLL_READABLE,
  POLL_WRITABLE,
  POLL_DISCONNECT,
} from './addon.js';
export type { Addon, NativeMapping, NativePoll, FutexResult } from './addon.js';
export { systemError } from './errors.js';
export { dupAll, closeOnce } from './fds.js';
