// The behaviour that the server-dependent tests of Upstash's own @upstash/qstash repository
// (src/client/*.test.ts) check against QStash, checked here against duraton with the pinned
// SDK. Each test names, in its title, what it checks; docs/compatibility.md maps every
// Upstash test to the test here (or elsewhere in this suite) that checks the same thing.
//
// Destinations are local endpoints; messages that must stay pending are published with a
// delay and cancelled at the end, so nothing leaks into the other files of the suite.

import { test } from "node:test";
import assert from "node:assert/strict";
import { openai, anthropic, custom } from "@upstash/qstash";
import { newClient, startEndpoint, waitFor, tag, rejectsWithStatus, env } from "./lib.mjs";

const client = newClient();
const DAY = 24 * 60 * 60;

/** Headers of a stored message, case-insensitively (messages.get answers a name → values map). */
const headersOf = (m) => {
  const h = new Headers();
  for (const [k, v] of Object.entries(m.header ?? {})) for (const one of [].concat(v)) h.append(k, one);
  return h;
};

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

test("url groups: publish makes one message per endpoint naming the group; add, get, list and delete endpoints", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const name = `ug-${tag()}`;
  t.after(() => client.urlGroups.delete(name).catch(() => {}));
  const e1 = { name: "first", url: `${ep.url}/ug/1` };
  const e2 = { name: "second", url: `${ep.url}/ug/2` };

  await client.urlGroups.addEndpoints({ name, endpoints: [e1] });
  let group = await client.urlGroups.get(name);
  assert.ok(group.endpoints.some((e) => e.name === e1.name && e.url === e1.url), JSON.stringify(group));
  await client.urlGroups.addEndpoints({ name, endpoints: [e2] });
  const listed = (await client.urlGroups.list()).find((g) => g.name === name);
  assert.ok(listed, "the group is listed");
  for (const e of [e1, e2]) assert.ok(listed.endpoints.some((x) => x.name === e.name && x.url === e.url), JSON.stringify(listed));

  const res = await client.publish({ urlGroup: name, delay: 3, headers: { "test-header": "test-value" } });
  assert.equal(res.length, 2, JSON.stringify(res));
  t.after(() => client.messages.cancel(res.map((r) => r.messageId)).catch(() => {}));
  for (const r of res) {
    const m = await client.messages.get(r.messageId);
    assert.equal(m.urlGroup, name, `message ${r.messageId}: ${JSON.stringify(m)}`);
  }

  await client.urlGroups.delete(name);
  await rejectsWithStatus(client.urlGroups.get(name), 404, "get of a deleted url group");
});

test("queues: enqueue names the queue; batch with queueName to a url group and a url answers an array (also for one item)", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const queueName = `q-${tag()}`;
  const urlGroup = `qug-${tag()}`;
  const ids = [];
  t.after(async () => {
    await client.messages.cancel(ids).catch(() => {});
    await client.queue({ queueName }).delete().catch(() => {});
    await client.urlGroups.delete(urlGroup).catch(() => {});
  });
  // A paused queue keeps what it is given, so messages.get still finds it.
  await client.queue({ queueName }).upsert({ parallelism: 1, paused: true });
  const r = await client.queue({ queueName }).enqueue({ url: `${ep.url}/q`, body: JSON.stringify({ hello: "world" }), headers: { "test-header": "test-value" } });
  ids.push(r.messageId);
  assert.equal((await client.messages.get(r.messageId)).queueName, queueName);

  await client.urlGroups.addEndpoints({ name: urlGroup, endpoints: [{ name: "first", url: `${ep.url}/qug` }] });
  const two = await client.batch([
    { urlGroup, body: "message", queueName },
    { url: `${ep.url}/qurl`, queueName },
  ]);
  assert.ok(Array.isArray(two), JSON.stringify(two));
  const one = await client.batch([{ urlGroup, body: "message", queueName }]);
  assert.ok(Array.isArray(one), JSON.stringify(one));
  const json = await client.batchJSON([
    { urlGroup, body: "message", queueName },
    { url: `${ep.url}/qurl`, queueName },
  ]);
  assert.ok(Array.isArray(json), JSON.stringify(json));
  for (const x of [...two, ...one, ...json].flat()) if (x?.messageId) ids.push(x.messageId);
});

test("queues: upsert, get, list, pause and resume (also through upsert paused), delete", { timeout: 30000 }, async () => {
  const q1 = `queue-${tag()}`;
  const q2 = `queue-${tag()}`;
  await client.queue({ queueName: q1 }).upsert({ parallelism: 2 });
  await client.queue({ queueName: q2 }).upsert({ parallelism: 2 });
  assert.equal((await client.queue({ queueName: q1 }).get()).name, q1);
  const names = (await client.queue().list()).map((q) => q.name);
  assert.ok(names.includes(q1) && names.includes(q2), JSON.stringify(names));

  const queue = client.queue({ queueName: q1 });
  assert.equal((await queue.get()).paused, false);
  await queue.pause();
  assert.equal((await queue.get()).paused, true);
  await queue.resume();
  assert.equal((await queue.get()).paused, false);
  await queue.upsert({ paused: true });
  assert.equal((await queue.get()).paused, true);
  await queue.upsert({ paused: false });
  assert.equal((await queue.get()).paused, false);

  await client.queue({ queueName: q1 }).delete();
  await client.queue({ queueName: q2 }).delete();
  const left = (await client.queue().list()).map((q) => q.name);
  assert.ok(!left.includes(q1) && !left.includes(q2), JSON.stringify(left));
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

test("flow control: messages.get shows key, parallelism, rate, period; flowControl get, global parallelism, pause/resume, pin/unpin, resetRate", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const key = `fc-info-${tag()}`;
  const { messageId } = await client.publish({
    url: `${ep.url}/fc`,
    body: "hello",
    delay: "1d",
    flowControl: { key, parallelism: 10, ratePerSecond: 5, period: "1d" },
  });
  t.after(() => client.messages.cancel(messageId).catch(() => {}));
  const m = await client.messages.get(messageId);
  assert.equal(m.flowControlKey, key);
  assert.equal(m.parallelism, 10);
  assert.equal(m.ratePerSecond, 5);
  assert.equal(m.rate, 5);
  assert.equal(m.period, DAY);

  const info = await client.flowControl.get(key);
  assert.equal(info.flowControlKey, key);
  for (const f of ["waitListSize", "parallelismMax", "parallelismCount"]) assert.equal(typeof info[f], "number", `${f}: ${JSON.stringify(info)}`);
  const global = await client.flowControl.getGlobalParallelism();
  assert.equal(typeof global.parallelismMax, "number", JSON.stringify(global));
  assert.equal(typeof global.parallelismCount, "number", JSON.stringify(global));

  await client.flowControl.pause(key);
  assert.equal((await client.flowControl.get(key)).isPaused, true);
  await client.flowControl.resume(key);
  assert.equal((await client.flowControl.get(key)).isPaused, false);

  await client.flowControl.pin(key, { parallelism: 3, rate: 20, period: 120 });
  const pinned = await client.flowControl.get(key);
  assert.equal(pinned.isPinnedParallelism, true);
  assert.equal(pinned.isPinnedRate, true);
  assert.equal(pinned.parallelismMax, 3);
  assert.equal(pinned.rateMax, 20);
  assert.equal(pinned.ratePeriod, 120);
  await client.flowControl.unpin(key, { parallelism: true });
  const partial = await client.flowControl.get(key);
  assert.equal(partial.isPinnedParallelism, false, "unpinning parallelism only");
  assert.equal(partial.isPinnedRate, true, "rate stays pinned");
  await client.flowControl.unpin(key, { parallelism: true, rate: true });
  const unpinned = await client.flowControl.get(key);
  assert.equal(unpinned.isPinnedParallelism, false);
  assert.equal(unpinned.isPinnedRate, false);

  await client.flowControl.resetRate(key);
  assert.equal((await client.flowControl.get(key)).rateCount, 0);
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

test("schedules: create keeps every field (cron trimmed, headers canonical); list; pause/resume; create with the same id replaces it", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const queueName = `sq-${tag()}`;
  const made = [];
  t.after(async () => {
    for (const id of made) await client.schedules.delete(id).catch(() => {});
    await client.queue({ queueName }).delete().catch(() => {});
  });
  const { scheduleId } = await client.schedules.create({
    destination: `${ep.url}/s`,
    body: JSON.stringify({ hello: "world" }),
    headers: { "test-header": "test-value", "Upstash-Forward-bypass-tunnel-reminder": "client-test" },
    method: "GET",
    callback: `${ep.url}/cb`,
    failureCallback: `${ep.url}/failure`,
    delay: 10,
    retries: 5,
    queueName,
    cron: "*/10 * * * * ",
  });
  made.push(scheduleId);
  const s = await client.schedules.get(scheduleId);
  assert.equal(s.cron, "*/10 * * * *");
  assert.equal(s.destination, `${ep.url}/s`);
  assert.equal(s.method, "GET");
  assert.deepEqual(s.header, {
    "Bypass-Tunnel-Reminder": ["client-test"],
    "Content-Type": ["application/json"],
    "Test-Header": ["test-value"],
  });
  assert.equal(s.body, '{"hello":"world"}');
  assert.equal(s.retries, 5);
  assert.equal(s.delay, 10);
  assert.equal(s.callback, `${ep.url}/cb`);
  assert.equal(s.failureCallback, `${ep.url}/failure`);
  assert.equal(s.queueName, queueName);

  const other = await client.schedules.create({ destination: `${ep.url}/s2`, cron: "*/10 * * * * " });
  made.push(other.scheduleId);
  const listed = (await client.schedules.list()).map((x) => x.scheduleId);
  assert.ok(listed.includes(scheduleId) && listed.includes(other.scheduleId), JSON.stringify(listed));

  const p = await client.schedules.create({ cron: "1 1 1 1 1", destination: `${ep.url}/p`, body: JSON.stringify({ ex_key: "ex_value" }) });
  made.push(p.scheduleId);
  let g = await client.schedules.get(p.scheduleId);
  assert.equal(g.cron, "1 1 1 1 1");
  assert.equal(g.isPaused, false);
  await client.schedules.pause({ schedule: p.scheduleId });
  assert.equal((await client.schedules.get(p.scheduleId)).isPaused, true);
  await client.schedules.resume({ schedule: p.scheduleId });
  assert.equal((await client.schedules.get(p.scheduleId)).isPaused, false);

  const id = `sched-edit-${tag()}`;
  made.push(id);
  await client.schedules.create({ destination: `${ep.url}/initial`, cron: "*/5 * * * *", scheduleId: id, body: "my-payload" });
  g = await client.schedules.get(id);
  assert.equal(g.destination, `${ep.url}/initial`);
  await client.schedules.create({ destination: `${ep.url}/updated`, cron: "*/5 * * * *", scheduleId: id });
  const same = (await client.schedules.list()).filter((x) => x.scheduleId === id);
  assert.equal(same.length, 1, "one schedule under the id");
  assert.equal(same[0].destination, `${ep.url}/updated`);
  assert.equal(same[0].body, undefined, "the replacement has no body");
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
  assert.ok(env.url);
});

// Upstash's chat tests publish, batch and enqueue LLM requests and check only the message ids
// (their answers need the provider, a key and the internet). Here the messages are delayed
// and cancelled: what is checked is where they would go, and with which headers.
test("llm api: publish, batch and enqueue to OpenAI, Anthropic and a custom provider address the provider with its auth headers", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const ids = [];
  t.after(() => client.messages.cancel(ids).catch(() => {}));
  const body = { model: "gpt-3.5-turbo", messages: [{ role: "user", content: "hello" }] };
  const cases = [
    [openai({ token: "sk-test" }), "https://api.openai.com/v1/chat/completions", { Authorization: "Bearer sk-test" }],
    [anthropic({ token: "ak-test" }), "https://api.anthropic.com/v1/messages", { "X-Api-Key": "ak-test" }],
    [custom({ baseUrl: `${ep.url}/llm`, token: "ck-test" }), `${ep.url}/llm/v1/chat/completions`, { Authorization: "Bearer ck-test" }],
  ];
  const queueName = `llm-${tag()}`;
  t.after(() => client.queue({ queueName }).delete().catch(() => {}));
  await client.queue({ queueName }).upsert({ parallelism: 1, paused: true });
  for (const [provider, url, auth] of cases) {
    const api = { name: "llm", provider };
    const published = await client.publishJSON({ api, body, callback: `${ep.url}/cb`, delay: 3600 });
    const [batched] = await client.batchJSON([{ api, body, callback: `${ep.url}/cb`, delay: 3600 }]);
    const enqueued = await client.queue({ queueName }).enqueueJSON({ api, body, callback: `${ep.url}/cb` });
    for (const { messageId } of [published, batched, enqueued]) {
      ids.push(messageId);
      const m = await client.messages.get(messageId);
      assert.equal(m.url, url, `message ${messageId}`);
      assert.equal(m.callback, `${ep.url}/cb`);
      const h = headersOf(m);
      for (const [k, v] of Object.entries(auth)) assert.equal(h.get(k), v, `${url}: ${k}`);
      assert.deepEqual(JSON.parse(m.body), body);
    }
  }
  assert.equal(ep.deliveries.length, 0);
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
