// What the server-dependent tests of Upstash's own @upstash/qstash repository check against
// QStash about its resources (src/client: url groups, topics, queues, flow control, schedules,
// and the LLM api messages of the chat tests), checked against duraton with the pinned SDK.
// docs/compatibility.md maps every Upstash test to the test here (or elsewhere in this suite)
// that checks the same thing. Destinations are local endpoints; messages that must stay
// pending are published with a delay and cancelled at the end.

import { test } from "node:test";
import assert from "node:assert/strict";
import { openai, anthropic, custom } from "@upstash/qstash";
import { newClient, startEndpoint, tag, rejectsWithStatus, headersOf } from "./lib.mjs";

const client = newClient();
const DAY = 24 * 60 * 60;

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
