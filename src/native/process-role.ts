// Whether this process is a child that spawn() started (startMethod 'spawn'): set by its
// bootstrap (src/process/child-process.ts), read by layers below src/process that behave
// differently there (NOTE [Deadly signals in a child], src/transport/endpoint.ts). Here, in
// the lowest layer, so that the bootstrap loads nothing more to set it.
let processChild = false;

export function markProcessChild(): void {
  processChild = true;
}

export function isProcessChild(): boolean {
  return processChild;
}
