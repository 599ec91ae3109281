// Entry point of a thread child (startMethod 'thread'), run as a Worker: its bootstrap is
// process/thread-main.ts, a function, so that the package bundle can hold it (NOTE [The
// package bundle]). It loads every reduction for arguments that carry tensorproc objects
// (NOTE [Spawn arguments]).
import { fileURLToPath } from 'node:url';
import { threadChildMain } from '../process/thread-main.js';

await threadChildMain(fileURLToPath(import.meta.url), () => import('./reductions.js'));
