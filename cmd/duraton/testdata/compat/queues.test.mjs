// Queues through the SDK: upsert, parallelism, FIFO delivery, get/list, pause/resume, delete.

import { test } from "node:test";
import assert from "node:assert/strict";
import { newClient, startEndpoint, waitFor, sleep, tag, rejectsWithStatus } from "./lib.mjs";

const client = newClient();

test("queue with parallelism 1 delivers one message at a time, in order", { timeout: 60000 }, async (t) => {
  const queueName = `q-${tag()}`;
  const queue = client.queue({ queueName });
  t.after(() => queue.delete().catch(() => {}));
  // Each delivery is held 200 ms so that overlapping deliveries would be observed.
  const ep = await startEndpoint(t, () => ({ status: 200, body: "ok", holdMs: 200 }));

  await queue.upsert({ parallelism: 1 });
  const info = await queue.get();
  assert.equal(info.name, queueName);
  assert.equal(info.parallelism, 1);
  assert.equal(info.paused, false);
  const all = await client.queue().list();
  assert.ok(Array.isArray(all), "list() answers an array");
  assert.ok(all.some((q) => q.name === queueName), `list() must contain ${queueName}: ${JSON.stringify(all)}`);

  const n = 5;
  const ids = [];
  for (let i = 0; i < n; i++) {
    const r = await queue.enqueueJSON({ url: `${ep.url}/queued`, body: { i }, retries: 0 });
    assert.equal(typeof r.messageId, "string");
    ids.push(r.messageId);
  }
  await waitFor(`${n} queued deliveries`, () => ids.every((id) => ep.forMessage(id).length > 0), { timeoutMs: 20000 });
  assert.equal(ep.maxConcurrency, 1, `parallelism 1 but ${ep.maxConcurrency} deliveries overlapped`);
  assert.deepEqual(
    ep.deliveries.map((d) => JSON.parse(d.body).i),
    [...Array(n).keys()],
    "a queue delivers in enqueue order",
  );
  ep.assertAllVerified();
});

test("queue pause holds deliveries until resume; delete removes the queue", { timeout: 60000 }, async (t) => {
  const queueName = `q-${tag()}`;
  const queue = client.queue({ queueName });
  t.after(() => queue.delete().catch(() => {}));
  const ep = await startEndpoint(t);

  await queue.upsert({ parallelism: 2 });
  assert.equal((await queue.get()).parallelism, 2);
  await queue.pause();
  assert.equal((await queue.get()).paused, true, "paused after pause()");

  const r = await queue.enqueueJSON({ url: `${ep.url}/paused`, body: { paused: true }, retries: 0 });
  // A negative check needs an observation window: nothing may arrive while paused.
  await sleep(1500);
  assert.equal(ep.deliveries.length, 0, "a paused queue must not deliver");
  const lagInfo = await queue.get();
  if (lagInfo.lag !== undefined) assert.equal(lagInfo.lag, 1, "lag counts the waiting message");

  await queue.resume();
  assert.equal((await queue.get()).paused, false, "not paused after resume()");
  await waitFor("the delivery after resume", () => ep.forMessage(r.messageId)[0]);

  // upsert can also change an existing queue.
  await queue.upsert({ parallelism: 3, paused: false });
  assert.equal((await queue.get()).parallelism, 3, "upsert updates parallelism");

  await queue.delete();
  await rejectsWithStatus(queue.get(), 404, "get of a deleted queue");
  const all = await client.queue().list();
  assert.ok(!all.some((q) => q.name === queueName), "deleted queue is not listed");
  ep.assertAllVerified();
});

test("enqueue to a queue that was never upserted creates it with parallelism 1", { timeout: 30000 }, async (t) => {
  // The QStash docs enqueue to "my-queue" without creating it first; queues default to
  // parallelism 1.
  const queueName = `q-implicit-${tag()}`;
  const queue = client.queue({ queueName });
  t.after(() => queue.delete().catch(() => {}));
  const ep = await startEndpoint(t);

  const r = await queue.enqueueJSON({ url: `${ep.url}/implicit`, body: { implicit: true }, retries: 0 });
  await waitFor("the delivery from an implicitly created queue", () => ep.forMessage(r.messageId)[0]);
  const info = await queue.get();
  assert.equal(info.name, queueName);
  assert.equal(info.parallelism, 1, "an implicit queue has parallelism 1");
  ep.assertAllVerified();
});

test("a queue with parallelism 1 holds the next message while the current one is retried", { timeout: 30000 }, async (t) => {
  // QStash docs: "The next message will wait for retries of the current one".
  const queueName = `q-${tag()}`;
  const queue = client.queue({ queueName });
  t.after(() => queue.delete().catch(() => {}));
  let failuresLeft = 1;
  const ep = await startEndpoint(t, (d) => {
    if (JSON.parse(d.body).i === 0 && failuresLeft > 0) {
      failuresLeft--;
      return { status: 500, body: "first attempt fails" };
    }
    return { status: 200, body: "ok" };
  });

  await queue.upsert({ parallelism: 1 });
  const first = await queue.enqueueJSON({ url: `${ep.url}/fifo`, body: { i: 0 }, retries: 1, retryDelay: "500" });
  const second = await queue.enqueueJSON({ url: `${ep.url}/fifo`, body: { i: 1 }, retries: 0 });
  await waitFor("both messages delivered", () => ep.forMessage(second.messageId).length > 0 && ep.forMessage(first.messageId).length === 2);
  assert.deepEqual(
    ep.deliveries.map((d) => `${JSON.parse(d.body).i}/retried=${d.header("upstash-retried")}`),
    ["0/retried=0", "0/retried=1", "1/retried=0"],
    "the second message must wait until the first one succeeded on its retry",
  );
  ep.assertAllVerified();
});
