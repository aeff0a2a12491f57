// What the server-dependent tests of Upstash's own @upstash/qstash repository check against
// QStash about messages (src/client: client, messages, dlq, logs, events), checked against
// duraton with the pinned SDK.
// docs/compatibility.md maps every Upstash test to the test here (or elsewhere in this suite)
// that checks the same thing. Destinations are local endpoints; messages that must stay
// pending are published with a delay and cancelled at the end.

import { test } from "node:test";
import assert from "node:assert/strict";
import { newClient, startEndpoint, waitFor, tag, rejectsWithStatus, headersOf } from "./lib.mjs";

const client = newClient();
const DAY = 24 * 60 * 60;

test("publish: messages.get shows the body, forwarded headers without their prefix, callbacks, retries, retryDelay, method", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const dest = `${ep.url}/fields`;
  const retryDelay = "1000 * retried";
  const a = await client.publishJSON({
    url: dest,
    body: { hello: "world" },
    headers: { "test-header": "test-value", "Upstash-Forward-bypass-tunnel-reminder": "client-test" },
    delay: 60,
    retries: 5,
    callback: `${ep.url}/cb?foo=bar`,
    failureCallback: `${ep.url}/fcb?bar=baz`,
    method: "PUT",
    retryDelay,
    timeout: 90,
  });
  t.after(() => client.messages.cancel(a.messageId).catch(() => {}));

  const m = await client.messages.get(a.messageId);
  const h = headersOf(m);
  assert.equal(m.body, JSON.stringify({ hello: "world" }));
  assert.equal(h.get("test-header"), "test-value");
  assert.equal(h.get("bypass-tunnel-reminder"), "client-test", "Upstash-Forward- prefix is stripped");
  assert.equal(h.get("upstash-forward-bypass-tunnel-reminder"), null, "the prefixed name is not stored");
  assert.equal(m.callback, `${ep.url}/cb?foo=bar`);
  assert.equal(m.failureCallback, `${ep.url}/fcb?bar=baz`);
  assert.ok(m.maxRetries >= 5, `maxRetries ${m.maxRetries}`);
  assert.equal(m.retryDelayExpression, retryDelay);
  assert.equal(m.method, "PUT");
  assert.equal(m.url, dest);
});

test("publish: delay and notBefore show in messages.get as notBefore (unix ms)", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const before = Date.now();
  const d = await client.publish({ url: `${ep.url}/delay`, delay: 5 });
  const notBeforeSec = Math.floor((Date.now() + 5000) / 1000);
  const n = await client.publish({ url: `${ep.url}/not-before`, notBefore: notBeforeSec });
  t.after(() => client.messages.cancel([d.messageId, n.messageId]).catch(() => {}));

  const md = await client.messages.get(d.messageId);
  assert.ok(md.notBefore >= before + 4000, `delay 5: notBefore ${md.notBefore} vs publish at ${before}`);
  const mn = await client.messages.get(n.messageId);
  assert.equal(mn.notBefore, notBeforeSec * 1000, "notBefore (seconds) is reported in ms");
});

test("global client headers reach every message; per-request headers override them (publish, publishJSON, batch, batchJSON)", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const ids = [];
  t.after(() => client.messages.cancel(ids).catch(() => {}));

  const withGlobals = newClient({
    headers: {
      "undefined-header": undefined,
      "test-header": "value",
      "test-header-2": "value-2",
      "TEST-CASE": "value-uppercase",
      "test-case": "value-lowercase",
    },
  });
  const a = await withGlobals.publish({ url: `${ep.url}/g1`, delay: 60 });
  ids.push(a.messageId);
  let h = headersOf(await client.messages.get(a.messageId));
  assert.equal(h.get("test-header"), "value");
  assert.equal(h.get("test-header-2"), "value-2");
  assert.equal(h.get("test-case"), "value-uppercase, value-lowercase");
  assert.equal(h.get("undefined-header"), "undefined");

  const overriding = newClient({ headers: { "test-header": "value", "test-header-2": "value-2", "stays-same": "same" } });
  const b = await overriding.publish({ url: `${ep.url}/g2`, delay: 60, headers: { "Test-Header": "override-value" } });
  const c = await overriding.publishJSON({ url: `${ep.url}/g3`, delay: 60, headers: { "Test-Header": "override-value" } });
  ids.push(b.messageId, c.messageId);
  for (const id of [b.messageId, c.messageId]) {
    h = headersOf(await client.messages.get(id));
    assert.equal(h.get("test-header"), "override-value", `message ${id}`);
    assert.equal(h.get("test-header-2"), "value-2", `message ${id}`);
    assert.equal(h.get("stays-same"), "same", `message ${id}`);
  }

  const batchClient = newClient({ headers: { "test-header": "value", "test-header-2": "value-2" } });
  for (const method of ["batch", "batchJSON"]) {
    const res = await batchClient[method]([
      { url: `${ep.url}/b1`, delay: 60, headers: { "Test-Header": "override-value-1", "stays-same": "same" } },
      { url: `${ep.url}/b2`, delay: 60, headers: { "Test-Header": "override-value-2", "stays-same": "same" } },
    ]);
    assert.equal(res.length, 2, `${method} answer: ${JSON.stringify(res)}`);
    for (const [i, r] of res.entries()) {
      ids.push(r.messageId);
      h = headersOf(await client.messages.get(r.messageId));
      assert.equal(h.get("test-header"), `override-value-${i + 1}`, `${method} item ${i}`);
      assert.equal(h.get("stays-same"), "same", `${method} item ${i}`);
      assert.equal(h.get("test-header-2"), "value-2", `${method} item ${i}`);
    }
  }
});

test("messages: deleteMany and deleteAll count what they cancel; cancel by label, by flow-control key and with an empty filter", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const batch = await client.batchJSON([
    { url: `${ep.url}/m`, body: { hello: "world" }, timeout: 90, delay: 10 },
    { url: `${ep.url}/m`, body: { hello: "world" }, timeout: 90, delay: 10 },
    { url: `${ep.url}/m`, body: { hello: "world" }, timeout: 90, delay: "10d" },
  ]);
  assert.equal(batch.length, 3);
  assert.equal(await client.messages.deleteMany([batch[0].messageId, batch[1].messageId]), 2);
  assert.ok((await client.messages.deleteAll()) >= 1, "deleteAll counts the one left");
  await rejectsWithStatus(client.messages.get(batch[2].messageId), 404, "get after deleteAll");

  const label = `msg-label-${tag()}`;
  const key = `fc-${tag()}`;
  const other = `fc-other-${tag()}`;
  const pub = (extra) => client.publish({ url: `${ep.url}/m2`, body: "hello", delay: "10d", ...extra });
  await pub({ label });
  await pub({ label });
  await pub({ flowControl: { key, parallelism: 5, rate: 10 } });
  await pub({ flowControl: { key, parallelism: 5, rate: 10 } });
  const kept = await pub({ flowControl: { key: other, parallelism: 5, rate: 10 } });

  assert.equal((await client.messages.cancel({ filter: { label } })).cancelled, 2);
  assert.equal((await client.messages.cancel({ filter: { flowControlKey: key } })).cancelled, 2);
  assert.equal((await client.messages.get(kept.messageId)).flowControlKey, other, "another key is left alone");
  assert.ok((await client.messages.cancel({ all: true })).cancelled >= 1);
  await rejectsWithStatus(client.messages.get(kept.messageId), 404, "get after cancel all");
  assert.equal(ep.deliveries.length, 0, "nothing cancelled was delivered");
});

test("messages.cancel: by several flow-control keys (OR), by path (one or several) and by host; one id answers cancelled 1", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const k = tag();
  const pub = async (req) => (await client.publish({ body: "hello", delay: "10d", ...req })).messageId;
  const gone = async (id) => rejectsWithStatus(client.messages.get(id), 404, `get of cancelled ${id}`);

  const [kA, kB, kC] = ["a", "b", "c"].map((x) => `cancel-multi-fc-${x}-${k}`);
  const fc = [];
  for (const key of [kA, kB, kC]) fc.push(await pub({ url: `${ep.url}/fc`, flowControl: { key, parallelism: 1 } }));
  assert.equal((await client.messages.cancel({ filter: { flowControlKey: [kA, kB] } })).cancelled, 2);
  await gone(fc[0]);
  await gone(fc[1]);
  assert.equal((await client.messages.get(fc[2])).flowControlKey, kC, "the third key survives");
  assert.equal((await client.messages.cancel({ filter: { flowControlKey: kC } })).cancelled, 1);

  const paths = ["a", "b", "c"].map((x) => `/cancel-path-${x}-${k}`);
  const byPath = [];
  for (const p of paths) byPath.push(await pub({ url: `${ep.url}${p}` }));
  assert.equal((await client.messages.cancel({ filter: { path: [paths[0], paths[1]] } })).cancelled, 2);
  await gone(byPath[0]);
  await gone(byPath[1]);
  assert.equal((await client.messages.get(byPath[2])).url, `${ep.url}${paths[2]}`);
  assert.equal((await client.messages.cancel({ filter: { path: paths[2] } })).cancelled, 1);

  const localhost = ep.url.replace("127.0.0.1", "localhost");
  const onIp = await pub({ url: `${ep.url}/cancel-host-${k}` });
  const onName = await pub({ url: `${localhost}/cancel-host-${k}` });
  assert.equal((await client.messages.cancel({ filter: { host: new URL(localhost).host, path: `/cancel-host-${k}` } })).cancelled, 1);
  await gone(onName);
  assert.equal((await client.messages.get(onIp)).url, `${ep.url}/cancel-host-${k}`, "the other host survives");

  const single = await client.messages.cancel(onIp);
  assert.equal(single.cancelled, 1);
  assert.equal(ep.deliveries.length, 0);
});

// Not an Upstash test, but what its "should publish a message and fail then call failure
// callback" is named for: the failure callback is called once the retries are spent.
test("a message that fails past its retries calls its failure callback", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t, (d) => (d.path === "/fcb" ? { status: 200 } : { status: 500, body: "nope" }));
  const r = await client.publish({ url: `${ep.url}/fails`, retries: 1, retryDelay: "100", failureCallback: `${ep.url}/fcb` });
  const cb = await waitFor("the failure callback", () => ep.at("/fcb")[0]);
  const body = JSON.parse(cb.body);
  assert.equal(body.status, 500);
  assert.equal(Buffer.from(body.body, "base64").toString(), "nope");
  assert.equal(body.sourceMessageId, r.messageId);
  assert.equal(ep.at("/fails").length, 2, "retries: 1 is two attempts");
});

test("DLQ: filter by messageId, label and url group; an entry keeps flow control and retryDelay; delete removes one entry", { timeout: 60000 }, async (t) => {
  const ep = await startEndpoint(t, () => ({ status: 500, body: "broken" }));
  const urlGroup = `dlq-ug-${tag()}`;
  t.after(() => client.urlGroups.delete(urlGroup).catch(() => {}));
  await client.urlGroups.addEndpoints({ name: urlGroup, endpoints: [{ name: "only", url: `${ep.url}/dlq-ug` }] });

  const label = `dlq-label-${tag()}`;
  const key = `dlq-fc-${tag()}`;
  const retryDelay = "2000 * retried";
  const plain = await client.publish({ url: `${ep.url}/dlq/plain`, retries: 0 });
  const labelled = await client.publish({ url: `${ep.url}/dlq/label`, retries: 0, label });
  const grouped = await client.publish({ urlGroup, retries: 0 });
  const fc = await client.publish({
    url: `${ep.url}/dlq/fc`,
    body: "hello",
    retries: 0,
    flowControl: { key, parallelism: 10, ratePerSecond: 5, period: "1d" },
    retryDelay,
  });

  const byId = await waitFor(`message ${plain.messageId} in the DLQ`, async () => {
    const r = await client.dlq.listMessages({ filter: { messageId: plain.messageId } });
    return r.messages.length ? r : undefined;
  });
  assert.equal(byId.messages.length, 1, "the messageId filter matches one entry");
  assert.equal(byId.messages[0].messageId, plain.messageId);

  const byLabel = await waitFor("the labelled entry", async () => {
    const r = await client.dlq.listMessages({ filter: { label } });
    return r.messages.length ? r : undefined;
  });
  assert.deepEqual(byLabel.messages.map((m) => m.messageId), [labelled.messageId]);

  const byGroup = await waitFor("the url group entry", async () => {
    const r = await client.dlq.listMessages({ filter: { urlGroup } });
    return r.messages.length ? r : undefined;
  });
  assert.equal(byGroup.messages.length, 1);
  assert.equal(byGroup.messages[0].messageId, grouped[0].messageId);

  const withFc = await waitFor("the flow-controlled entry", async () => {
    const r = await client.dlq.listMessages({ filter: { messageId: fc.messageId } });
    return r.messages[0];
  });
  assert.equal(withFc.flowControlKey, key);
  assert.equal(withFc.parallelism, 10);
  assert.equal(withFc.ratePerSecond, 5);
  assert.equal(withFc.rate, 5);
  assert.equal(withFc.period, DAY);
  assert.equal(withFc.retryDelayExpression, retryDelay);

  await client.dlq.delete(byId.messages[0].dlqId);
  const after = await client.dlq.listMessages({ filter: { messageId: plain.messageId } });
  assert.equal(after.messages.length, 0, "the deleted entry is gone");
  for (const e of [byLabel.messages[0], byGroup.messages[0], withFc]) await client.dlq.delete(e.dlqId);
});

test("logs and events: count 1 pages follow the cursor, newest first, in a logs / events array", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push((await client.publish({ url: `${ep.url}/logs/${i}`, delay: 60 })).messageId);
  t.after(() => client.messages.cancel(ids).catch(() => {}));

  for (const [method, field] of [["logs", "logs"], ["events", "events"]]) {
    const p1 = await client[method]({ filter: { count: 1 } });
    assert.ok(Array.isArray(p1[field]), `${method}: ${field} array`);
    assert.equal(p1[field].length, 1, `${method}: count 1`);
    assert.ok(p1.cursor, `${method}: a cursor while there is more`);
    const p2 = await client[method]({ cursor: p1.cursor, filter: { count: 1 } });
    assert.equal(p2[field].length, 1, `${method}: second page`);
    const [a, b] = [p1[field][0], p2[field][0]];
    assert.ok(a.time >= b.time, `${method}: newest first (${a.time} then ${b.time})`);
    assert.ok(a.messageId !== b.messageId || a.state !== b.state, `${method}: the second page is another entry`);
  }
});

test("logs: filter by one label, by several labels or urls (OR), by host and by path; no cursor on the last page", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const k = tag();
  const ids = [];
  t.after(() => client.messages.cancel(ids).catch(() => {}));
  const pub = async (req) => {
    const { messageId } = await client.publish({ body: "x", delay: "10d", ...req });
    ids.push(messageId);
    return messageId;
  };
  // Single-label messages only: what a multi-label message reports as `label` is another test.
  const [lA, lB, lC] = ["a", "b", "c"].map((x) => `or-${x}-${k}`);
  const mA = await pub({ url: `${ep.url}/l/a-${k}`, label: lA });
  const mB = await pub({ url: `${ep.url}/l/b-${k}`, label: lB });
  const mC = await pub({ url: `${ep.url}/l/c-${k}`, label: lC });
  // Two hosts: 127.0.0.1 and localhost name the same endpoint.
  const localhost = ep.url.replace("127.0.0.1", "localhost");
  const mHost = await pub({ url: `${localhost}/l/host-${k}` });

  const logIds = async (filter) => new Set((await client.logs({ filter })).logs.map((l) => l.messageId));

  const one = await client.logs({ filter: { label: lA } });
  assert.ok(one.logs.length > 0);
  assert.ok(one.logs.every((l) => l.label === lA && l.messageId === mA), JSON.stringify(one.logs));

  let got = await logIds({ label: [lA, lB] });
  assert.ok(got.has(mA) && got.has(mB) && !got.has(mC), `labels OR: ${[...got]}`);
  got = await logIds({ url: [`${ep.url}/l/a-${k}`, `${ep.url}/l/c-${k}`] });
  assert.ok(got.has(mA) && got.has(mC) && !got.has(mB), `urls OR: ${[...got]}`);
  // The host of a URL with a port is host:port (Upstash's test uses URLs without one).
  const lhost = new URL(localhost).host;
  got = await logIds({ host: lhost });
  assert.ok(got.has(mHost) && !got.has(mA), `host: ${[...got]}`);
  got = await logIds({ path: `/l/b-${k}` });
  assert.deepEqual([...got], [mB], "path");

  const none = await client.logs({ filter: { label: `non-existent-label-${k}` } });
  assert.deepEqual(none.logs, []);
  assert.equal(none.cursor, undefined, "no cursor (not an empty string) on the last page");
});
