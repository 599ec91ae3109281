// Which threads have a barrier, so that the death of one breaks it (NOTE [Barrier members]).
//
// NOTE [Barrier members]
// A party killed before it reaches a barrier never arrives, and nothing in the barrier's
// words could tell the others. So every thread that has a Barrier object (made it, or got it
// in a message or in spawn arguments) writes its token into the barrier's member table, and a
// waiter whose whole slice passed without a release looks at the members: one that died
// breaks the barrier (BrokenBarrierError for every waiter, as a timeout does). A thread leaves
// the table when its Barrier object is collected, and when it exits with code 0; one that
// dies, or exits with an error (an uncaught exception: it will not arrive either), stays, and
// is seen dead. A member need not be a party: the parent that made a barrier for its
// children is one too, and its death breaks the barrier like a party's.
import { onExit } from '../exit-hooks.js';
import { SyncCapacityError } from '../errors.js';
import { holderAlive, myToken } from './holder.js';
import type { SyncBlock } from './block.js';

/**
 * One table entry of this thread. It holds the barrier's words, not its block: a finalizer's
 * held value must not keep the barrier's storage (and its segment and descriptor) alive after
 * the barrier is gone, only the memory the entry is cleared in.
 */
interface Membership {
  readonly words: Int32Array;
  readonly index: number;
}

const held = new Set<Membership>();
const finalizer = new FinalizationRegistry<Membership>(leave);

function leave(m: Membership): void {
  held.delete(m);
  Atomics.compareExchange(m.words, m.index, myToken(), 0);
}

/** Writes this thread's token into the table words[from, from + n) for as long as `owner` lives. */
export function join(owner: object, block: SyncBlock, from: number, n: number): void {
  const w = block.words;
  const me = myToken();
  for (let pass = 0; pass < 2; pass++) {
    for (let j = from; j < from + n; j++) {
      if (Atomics.compareExchange(w, j, 0, me) === 0) {
        const m = { words: w, index: j };
        held.add(m);
        finalizer.register(owner, m);
        return;
      }
    }
    // Members that exited without leaving (killed ones, seen dead) make room.
    for (let j = from; j < from + n; j++) {
      const t = Atomics.load(w, j);
      if (t !== 0 && !holderAlive(t)) Atomics.compareExchange(w, j, t, 0);
    }
  }
  throw new SyncCapacityError(`More than ${n} threads have this Barrier at once.`);
}

/** The first member of words[from, from + n) that died, cleared from the table; 0 if none. */
export function deadMember(block: SyncBlock, from: number, n: number): number {
  const w = block.words;
  for (let j = from; j < from + n; j++) {
    const t = Atomics.load(w, j);
    if (t !== 0 && !holderAlive(t) && Atomics.compareExchange(w, j, t, 0) === t) return t;
  }
  return 0;
}

onExit((code) => {
  if (code !== 0) return;
  for (const m of held) leave(m);
});
