// mp.Manager (Python's SyncManager) and its proxies. Not the file_system segment manager (src/manager/).
export { Manager, SyncManager } from './manager.js';
export type { ManagerOptions, ManagerFunction } from './manager.js';
export { BaseProxy, DictProxy, ListProxy, NamespaceProxy, QueueProxy, LockProxy, ValueProxy } from './proxies.js';
export type { GetOptions as ManagerGetOptions, AcquireOptions as ManagerAcquireOptions } from './proxies.js';
