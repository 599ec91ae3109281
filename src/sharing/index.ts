import './allocator.js';
export { getAllSharingStrategies, getSharingStrategy, setSharingStrategy, STRATEGY_ENV } from './strategy.js';
export type { SharingStrategy } from './strategy.js';
export { Segment, SHM_PREFIX } from './segment.js';
export { HEADER_BYTES } from './segment-header.js';
export { cache as segmentCache, received as receiveCache, Lease } from './allocator.js';
export { exportStorage, importStorage, abandonExport, emptyCache } from './handle.js';
export type { StorageHandle, ExportedStorage } from './handle.js';
export {
  shedDescriptors,
  takeReserve,
  giveReserve,
  renewReserve,
  keptCount,
  retireWitness,
  witnessesRetired,
} from './descriptors.js';
export { binnedCount, closeBinned } from './witness-bin.js';
export { hasMappingRoom, mappingsError, mappedSegments } from './mappings.js';
export { slabs } from './allocator.js';
export { PACK_BYTES, SLAB_BYTES, PIECE_ALIGN } from './packing.js';
export { memoryStats } from './memory-stats.js';
export type { MemoryStats, SegmentCount } from './memory-stats.js';
export { holders, reclaimSlots } from './segment-header.js';
export { isAlive } from './liveness.js';
export { fdIdentity } from './segment.js';
