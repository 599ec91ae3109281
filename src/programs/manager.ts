// Entry point of the file_system manager, a process of its own (NOTE [The file_system manager],
// manager/server.ts), started by sharing/manager/manager-start.ts as `node manager.js <dir>`.
import { managerMain } from '../manager/server.js';

managerMain(process.argv);
