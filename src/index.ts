// The public API: a list of exports, nothing else (see ../shared/API.md).
export * from './errors.js';
