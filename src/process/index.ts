// Processes: spawn, startProcesses and ProcessContext, Process, currentProcess and parentProcess (API.md, "Processes").
export { spawn, startProcesses } from './spawn.js';
export type { SpawnOptions, StartProcessesOptions } from './spawn.js';
export { ProcessContext, SpawnContext } from './context.js';
export type { JoinOptions } from './context.js';
export { Process } from './process.js';
export type { ProcessOptions } from './process.js';
export { currentProcess, parentProcess } from './current.js';
export type { ProcessInfo } from './current.js';
export type { SpawnedProcess } from './child-handle.js';
export type { Target } from './target.js';
export type { StartMethod } from './messages.js';
