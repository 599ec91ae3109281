// A Node program whose DataLoader makes image batches, and a PyTorch model in a Python program
// started on its own (score_images.py) that scores them: the batches and the scores cross as
// shared memory, never copied (README, "Beyond one process tree"; docs/python.md).
//
//   node dist/examples/python/score-images.js            # in one terminal: waits for Python
//   .venv/bin/python examples/python/score_images.py     # in another, started by anyone
//
// Node names two queues: `tp-example-batches` carries { i, images, scores } to Python, which
// writes the model's output into `scores` in place (Node's memory) and answers `i` on
// `tp-example-done`. Node holds each batch until its answer, then releases it.
import * as mp from 'tensorproc';

type Batch = { x: mp.Tensor; y: mp.Tensor } & Disposable;
type Work = { i: number; images: mp.Tensor; scores: mp.Tensor } | null;

const BATCHES = Number(process.argv[2] ?? 16);
const BATCH_SIZE = 8;
const toPython = new mp.Queue<Work>({ name: 'tp-example-batches', maxsize: 4 });
const answers = new mp.Queue<number>({ name: 'tp-example-done' });

await using loader = new mp.DataLoader<Batch>(
  { module: new URL('./images.js', import.meta.url), export: 'makeImages', args: [BATCHES * BATCH_SIZE] },
  { batchSize: BATCH_SIZE, numWorkers: 2 },
);
console.log('waiting for score_images.py (start it now) ...');
const held = new Map<number, { batch: Batch; scores: mp.Tensor }>();
const meanByLabel = [0, 0, 0, 0];
const countByLabel = [0, 0, 0, 0];
const settle = async (): Promise<void> => {
  const i = await answers.get({ timeout: 120_000 });
  const { batch, scores } = held.get(i)!;
  held.delete(i);
  const s = scores.toArray() as number[];
  (batch.y.toArray() as number[]).forEach((label, k) => {
    meanByLabel[label]! += s[k]!;
    countByLabel[label]! += 1;
  });
  batch[Symbol.dispose]();
  scores.release();
};
let i = 0;
for await (const batch of loader) {
  const scores = mp.zeros([batch.x.shape[0]!], { shared: true }); // Python writes here
  held.set(i, { batch, scores });
  await toPython.put({ i, images: batch.x, scores });
  i++;
  if (held.size >= 4) await settle();
}
while (held.size > 0) await settle();
await toPython.put(null); // no more
console.log(`${i} batches scored in Python; mean score by label:`);
console.log(meanByLabel.map((m, label) => `  ${label}: ${(m / countByLabel[label]!).toFixed(4)}`).join('\n'));
toPython.close();
answers.close();
