// Named objects: reaching an object from processes this one did not start (NOTE [Named
// objects] in claim.ts).
export { attach } from './attach.js';
export type { AttachOptions } from './attach.js';
export { claimName, releaseName, nameOf, nameOption, checkName, NameClaim } from './claim.js';
