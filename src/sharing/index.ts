import './allocator.js';
export { getAllSharingStrategies, getSharingStrategy, setSharingStrategy, STRATEGY_ENV } from './strategy.js';
export type { SharingStrategy } from './strategy.js';
export { Segment, HEADER_BYTES, SHM_PREFIX } from './segment.js';
export { cache as segmentCache, received as receiveCache, Lease } from './allocator.js';
export { exportStorage, importStorage, abandonExport, emptyCache } from './handle.js';
export type { StorageHandle, ExportedStorage } from './handle.js';
export { shedDescriptors, takeReserve, giveReserve, ensureReserve, keptCount } from './descriptors.js';
export { hasMappingRoom, mappingsError, mappedSegments } from './mappings.js';
