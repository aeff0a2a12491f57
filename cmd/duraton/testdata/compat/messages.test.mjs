// The messages API (get / cancel, single and bulk) and the logs API, through the SDK.

import { test } from "node:test";
import assert from "node:assert/strict";
import { newClient, startEndpoint, waitFor, tag, rejectsWithStatus } from "./lib.mjs";

const client = newClient();

test("messages.get shows a pending message; cancel and delete remove it (then 404)", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const dest = `${ep.url}/later`;
  const body = { later: tag() };
  const before = Date.now();
  const a = await client.publishJSON({ url: dest, body, delay: 60, retries: 0, headers: { "X-Kept": "kept" } });

  const m = await client.messages.get(a.messageId);
  assert.equal(m.messageId, a.messageId);
  assert.equal(m.url, dest);
  assert.equal(m.body, JSON.stringify(body));
  if (m.method !== undefined) assert.equal(m.method, "POST");
  if (m.maxRetries !== undefined) assert.equal(m.maxRetries, 0);
  if (m.notBefore !== undefined) {
    assert.ok(m.notBefore >= before + 59000, `notBefore ${m.notBefore} should be ~60 s (in ms) after publish ${before}`);
    assert.ok(m.notBefore <= Date.now() + 61000, `notBefore ${m.notBefore} is too far in the future (seconds vs ms?)`);
  }
  if (m.createdAt !== undefined) {
    assert.ok(Math.abs(m.createdAt - before) < 10000, `createdAt ${m.createdAt} should be unix ms near ${before}`);
  }

  // cancel() (2.12.0) expects JSON {cancelled}.
  const c = await client.messages.cancel(a.messageId);
  assert.equal(c?.cancelled, 1, `cancel answer: ${JSON.stringify(c)}`);
  await rejectsWithStatus(client.messages.get(a.messageId), 404, "get after cancel");
  await rejectsWithStatus(client.messages.cancel(a.messageId), 404, "cancel twice");

  // The deprecated delete() uses the same route but ignores the body.
  const b = await client.publishJSON({ url: dest, body: { b: 1 }, delay: 60, retries: 0 });
  await client.messages.get(b.messageId);
  await client.messages.delete(b.messageId);
  await rejectsWithStatus(client.messages.get(b.messageId), 404, "get after delete");

  await rejectsWithStatus(client.messages.get(`msg_does_not_exist_${tag()}`), 404, "get of an unknown id");
  assert.equal(ep.deliveries.length, 0, "cancelled messages must not be delivered");
});

test("bulk cancel: cancel([ids]), deleteMany([ids]) and cancel({all:true})", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const ids = [];
  for (let i = 0; i < 4; i++) {
    const r = await client.publishJSON({ url: `${ep.url}/bulk/${i}`, body: { i }, delay: 60, retries: 0 });
    ids.push(r.messageId);
  }

  const r1 = await client.messages.cancel([ids[0], ids[1]]);
  assert.equal(r1.cancelled, 2, `cancel([2 ids]) answer: ${JSON.stringify(r1)}`);
  await rejectsWithStatus(client.messages.get(ids[0]), 404, "get of a bulk-cancelled message");
  await rejectsWithStatus(client.messages.get(ids[1]), 404, "get of a bulk-cancelled message");
  assert.equal((await client.messages.get(ids[2])).messageId, ids[2], "other messages stay");

  const n = await client.messages.deleteMany([ids[2]]);
  assert.equal(n, 1, "deleteMany returns the number cancelled");
  await rejectsWithStatus(client.messages.get(ids[2]), 404, "get after deleteMany");

  // { all: true } cancels a batch (count, 100 by default) per call: loop as the docs do.
  let total = 0;
  for (let r2; (r2 = await client.messages.cancel({ all: true })).cancelled > 0; ) total += r2.cancelled;
  assert.ok(total >= 1, `cancel({all:true}) must cancel the remaining message`);
  await rejectsWithStatus(client.messages.get(ids[3]), 404, "get after cancel all");
  assert.equal(ep.deliveries.length, 0, "cancelled messages must not be delivered");
});

test("cancel({filter:{label:[a,b]}}) cancels a OR b and nothing else", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const t0 = tag();
  const [la, lb, lc] = [`a-${t0}`, `b-${t0}`, `c-${t0}`];
  const ids = [];
  for (const label of [la, lb, lc]) {
    const r = await client.publishJSON({ url: `${ep.url}/label`, body: { label }, delay: 60, retries: 0, label });
    ids.push(r.messageId);
  }
  const r = await client.messages.cancel({ filter: { label: [la, lb] } });
  assert.equal(r.cancelled, 2, `cancel by two labels: ${JSON.stringify(r)}`);
  await rejectsWithStatus(client.messages.get(ids[0]), 404, "label a cancelled");
  await rejectsWithStatus(client.messages.get(ids[1]), 404, "label b cancelled");
  assert.equal((await client.messages.get(ids[2])).messageId, ids[2], "label c stays");
  const r2 = await client.messages.cancel({ filter: { label: lc } });
  assert.equal(r2.cancelled, 1);
  assert.equal(ep.deliveries.length, 0, "cancelled messages must not be delivered");
});

test("cancel({filter, count}) cancels at most count messages per call", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const label = `count-${tag()}`;
  const ids = [];
  for (let i = 0; i < 3; i++) {
    const r = await client.publishJSON({ url: `${ep.url}/count`, body: { i }, delay: 60, retries: 0, label });
    ids.push(r.messageId);
  }
  const one = await client.messages.cancel({ filter: { label }, count: 1 });
  assert.equal(one.cancelled, 1, `count: 1 cancels one: ${JSON.stringify(one)}`);
  let left = 0;
  for (const id of ids) {
    try {
      await client.messages.get(id);
      left++;
    } catch {
      /* cancelled */
    }
  }
  assert.equal(left, 2, "two of the three are still pending");
  const rest = await client.messages.cancel({ filter: { label }, count: 5 });
  assert.equal(rest.cancelled, 2, `the rest: ${JSON.stringify(rest)}`);
  assert.equal(ep.deliveries.length, 0, "cancelled messages must not be delivered");
});

test("a message with several labels: label is the first, labels all of them", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const t0 = tag();
  const [la, lb] = [`la-${t0}`, `lb-${t0}`];
  const res = await client.publish({ url: `${ep.url}/labels`, body: "x", delay: 60, retries: 0, headers: { "Upstash-Label": `${la},${lb}` } });
  const m = await client.messages.get(res.messageId);
  assert.equal(m.label, la, `legacy label is the first label: ${JSON.stringify(m)}`);
  assert.deepEqual(m.labels, [la, lb]);
  // A filter on either label finds it.
  const logs = await client.logs({ filter: { label: lb } });
  assert.ok(logs.logs.some((l) => l.messageId === res.messageId), "logs by the second label");
  for (const l of logs.logs.filter((l) => l.messageId === res.messageId)) {
    assert.equal(l.label, la, `log label is the first label: ${JSON.stringify(l)}`);
    assert.deepEqual(l.labels, [la, lb]);
  }
  await client.messages.cancel(res.messageId);
});

test("logs({filter:{messageId}}) lists CREATED and DELIVERED, newest first", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const dest = `${ep.url}/logged`;
  const res = await client.publishJSON({ url: dest, body: { logged: tag() }, retries: 0 });
  await waitFor("the delivery", () => ep.forMessage(res.messageId)[0]);

  let logs;
  await waitFor("CREATED and DELIVERED in the logs", async () => {
    const r = await client.logs({ filter: { messageId: res.messageId } });
    logs = r.logs;
    const states = new Set(logs.map((l) => l.state));
    return states.has("CREATED") && states.has("DELIVERED");
  });

  for (const l of logs) {
    assert.equal(l.messageId, res.messageId, `filter by messageId leaked another message: ${JSON.stringify(l)}`);
    assert.equal(l.url, dest);
    assert.equal(typeof l.time, "number");
  }
  for (let i = 1; i < logs.length; i++) {
    assert.ok(logs[i - 1].time >= logs[i].time, `logs must be newest first: ${logs.map((l) => `${l.state}@${l.time}`)}`);
  }
  const created = logs.find((l) => l.state === "CREATED");
  const delivered = logs.find((l) => l.state === "DELIVERED");
  assert.ok(delivered.time >= created.time, "DELIVERED is not older than CREATED");
  assert.ok(Math.abs(created.time - Date.now()) < 60000, `log time ${created.time} must be unix ms`);
  assert.ok(
    logs.indexOf(delivered) < logs.indexOf(created),
    `DELIVERED must come before CREATED (newest first): ${logs.map((l) => l.state)}`,
  );
  ep.assertAllVerified();
});
