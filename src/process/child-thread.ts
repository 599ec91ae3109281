// Entry point of a thread child (startMethod 'thread'), run as a Worker: its bootstrap is
// thread-main.ts, a function, so that the package bundle can hold it (NOTE [The package bundle]).
import { fileURLToPath } from 'node:url';
import { threadChildMain } from './thread-main.js';

await threadChildMain(fileURLToPath(import.meta.url));
