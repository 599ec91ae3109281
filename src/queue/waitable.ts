// Which objects mp.wait() can watch, and how it reaches the endpoint of each: Queue,
// SimpleQueue and Connection register an accessor (their endpoints are private), so that
// wait-any.ts needs no knowledge of their insides.
import type { Endpoint } from '../transport/index.js';

const accessors: [Function, (obj: never) => Endpoint][] = [];

/** `endpointOf(obj)` reaches the endpoint of objects of `type` (and its subclasses). */
export function registerWaitable<T>(type: Function & { readonly prototype: T }, endpointOf: (obj: T) => Endpoint): void {
  accessors.push([type, endpointOf as (obj: never) => Endpoint]);
}

/** The endpoint whose readiness says a message waits on `obj`, or undefined for another kind. */
export function endpointOf(obj: object): Endpoint | undefined {
  for (const [type, get] of accessors) if (obj instanceof type) return get(obj as never);
  return undefined;
}
