// The SyncManager's server process (mp.Manager): the module its Process child loads by path
// (sync-manager/manager.ts names it). Its loop is sync-manager/server-main.ts.
export { main } from '../sync-manager/server-main.js';
