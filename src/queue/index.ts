// Queues, pipes and events across processes and threads (API.md "Queues, pipes, events").
export { Queue } from './queue.js';
export type { QueueOptions, TimeoutOptions } from './queue.js';
export { SimpleQueue } from './simple-queue.js';
export { Pipe, Connection } from './connection.js';
export type { PipeOptions } from './connection.js';
export { Event } from './event.js';
export { JoinableQueue } from './joinable-queue.js';
export { wait } from './wait-any.js';
export type { Waitable, WaitOptions } from './wait-any.js';
export type { SimpleQueueOptions } from './simple-queue.js';
export type { EventOptions } from './event.js';
