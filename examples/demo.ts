// `npm start`: a tensor written in one process is read and written in another, without a
// copy, under each sharing strategy.
import * as mp from 'tensorproc';

const worker = { module: new URL('./demo-worker.js', import.meta.url), export: 'scale' };

for (const strategy of mp.getAllSharingStrategies()) {
  mp.setSharingStrategy(strategy);
  // Born in shared memory: sending it costs a handle, whatever its size.
  const t = mp.zeros([2, 3], { shared: true });
  t.copy(
    mp.tensor([
      [1, 2, 3],
      [4, 5, 6],
    ]),
  );
  const before = JSON.stringify(t.toArray());
  // The child receives a view of the same memory and multiplies it in place by 10.
  await mp.spawn(worker, { args: [t, 10] });
  console.log(`${strategy.padEnd(15)} parent wrote ${before}, child ${'scaled it to'} ${JSON.stringify(t.toArray())}`);
  t.release();
}
