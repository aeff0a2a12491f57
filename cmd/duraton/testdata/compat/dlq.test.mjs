// Dead-letter queue through the SDK: failed messages land there after their retries, can be
// listed, retried and deleted.

import { test } from "node:test";
import assert from "node:assert/strict";
import { newClient, startEndpoint, waitFor, tag } from "./lib.mjs";

const client = newClient();

async function dlqEntry(messageId) {
  const { messages } = await client.dlq.listMessages();
  return messages.find((m) => m.messageId === messageId);
}

async function waitForDlq(messageId) {
  return waitFor(`message ${messageId} in the DLQ`, () => dlqEntry(messageId), { timeoutMs: 20000 });
}

test("failed messages land in the DLQ; retry redelivers; delete removes", { timeout: 60000 }, async (t) => {
  const failure = `boom ${tag()}`;
  const ep = await startEndpoint(t, () => ({ status: 500, body: failure }));
  const dest = `${ep.url}/always-fails`;

  const a = await client.publishJSON({ url: dest, body: { a: 1 }, retries: 0 });
  const b = await client.publishJSON({ url: dest, body: { b: 1 }, retries: 1, retryDelay: "100" });

  const ea = await waitForDlq(a.messageId);
  const eb = await waitForDlq(b.messageId);
  for (const [e, name] of [[ea, "a"], [eb, "b"]]) {
    assert.equal(typeof e.dlqId, "string", `${name}: dlqId`);
    assert.ok(e.dlqId.length > 0, `${name}: dlqId is empty`);
    assert.equal(e.url, dest, `${name}: url`);
    assert.equal(e.responseStatus, 500, `${name}: responseStatus`);
    if (e.responseBody !== undefined) assert.equal(e.responseBody, failure, `${name}: responseBody`);
  }
  assert.equal(eb.body, JSON.stringify({ b: 1 }), "DLQ entry keeps the message body");

  // retries: 0 → exactly one attempt; retries: 1 → two attempts, Upstash-Retried 0 then 1.
  assert.equal(ep.forMessage(a.messageId).length, 1, "retries: 0 means one attempt");
  const attemptsB = ep.forMessage(b.messageId);
  assert.equal(attemptsB.length, 2, "retries: 1 means two attempts");
  assert.deepEqual(attemptsB.map((d) => d.header("upstash-retried")), ["0", "1"]);
  const gap = attemptsB[1].receivedAt - attemptsB[0].receivedAt;
  assert.ok(gap >= 80, `retryDelay "100" (ms) honoured: second attempt ${gap} ms after the first`);
  assert.ok(gap < 10000, `retryDelay "100" is milliseconds: second attempt came ${gap} ms later`);

  // Retry a from the DLQ against an endpoint that now succeeds.
  ep.respond = () => ({ status: 200, body: "fixed" });
  const retriedAt = Date.now();
  const r = await client.dlq.retry(ea.dlqId);
  assert.ok(Array.isArray(r.responses), `dlq.retry answer: ${JSON.stringify(r)}`);
  assert.equal(r.responses.length, 1);
  const newId = r.responses[0].messageId;
  assert.equal(typeof newId, "string");
  const redelivered = await waitFor("the redelivery of the retried DLQ message", () =>
    ep.deliveries.find((d) => d.receivedAt >= retriedAt && d.messageId === newId),
  );
  assert.equal(redelivered.body, JSON.stringify({ a: 1 }));
  assert.equal(redelivered.url, dest);

  // delete(dlqId) removes b.
  await client.dlq.delete(eb.dlqId);
  const { messages } = await client.dlq.listMessages();
  assert.equal(messages.find((m) => m.dlqId === eb.dlqId), undefined, "deleted DLQ entry is gone");
  ep.assertAllVerified();
});

test("dlq.deleteMany removes several entries at once", { timeout: 60000 }, async (t) => {
  const ep = await startEndpoint(t, () => ({ status: 500, body: "no" }));
  const ids = [];
  for (let i = 0; i < 3; i++) {
    const r = await client.publishJSON({ url: `${ep.url}/dlq-many/${i}`, body: { i }, retries: 0 });
    ids.push(r.messageId);
  }
  const entries = [];
  for (const id of ids) entries.push(await waitForDlq(id));

  const res = await client.dlq.deleteMany({ dlqIds: [entries[0].dlqId, entries[1].dlqId] });
  assert.equal(res.deleted, 2, `deleteMany answer: ${JSON.stringify(res)}`);
  const { messages } = await client.dlq.listMessages();
  const left = new Set(messages.map((m) => m.dlqId));
  assert.ok(!left.has(entries[0].dlqId) && !left.has(entries[1].dlqId), "deleted entries are gone");
  assert.ok(left.has(entries[2].dlqId), "the entry not named stays");

  await client.dlq.delete(entries[2].dlqId);
  ep.assertAllVerified();
});
