// Publishing through the official SDK: what arrives at the destination, when, and the
// callback that follows a delivery.

import { test } from "node:test";
import assert from "node:assert/strict";
import { newClient, startEndpoint, waitFor, tag } from "./lib.mjs";

const client = newClient();

test("publishJSON delivers body, method and forwarded headers exactly", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const body = { hello: "world", id: tag(), n: 42, nested: { list: [1, "two", null], unicode: "héllo ✓ <tag> & 'q'" } };
  const dest = `${ep.url}/put-target?x=1&y=two`;

  const res = await client.publishJSON({
    url: dest,
    method: "PUT",
    headers: { "X-Custom-Header": "custom-value", "X-Second": "second value" },
    body,
    retries: 0,
  });
  assert.equal(typeof res.messageId, "string");
  assert.ok(res.messageId.length > 0, "messageId is empty");

  const d = await waitFor("the delivery", () => ep.forMessage(res.messageId)[0]);
  assert.equal(d.method, "PUT");
  assert.equal(d.url, dest, "destination URL incl. its query string");
  assert.equal(d.body, JSON.stringify(body), "body must arrive byte for byte");
  assert.equal(d.header("content-type"), "application/json");
  assert.equal(d.header("x-custom-header"), "custom-value", "forwarded header");
  assert.equal(d.header("x-second"), "second value", "forwarded header");
  assert.equal(d.header("upstash-retried"), "0");
  assert.equal(d.header("upstash-forward-x-custom-header"), undefined, "the Upstash-Forward- prefix must be stripped");
  assert.equal(d.header("authorization"), undefined, "the API token must never reach the destination");
  ep.assertAllVerified();
});

test("publish delivers a non-JSON body with its own content type unchanged", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const body = `plain text ${tag()}\nsecond line\twith tab, ünïcödé and trailing spaces   `;
  const res = await client.publish({
    url: `${ep.url}/text`,
    body,
    headers: { "Content-Type": "text/plain; charset=utf-8" },
    retries: 0,
  });
  const d = await waitFor("the delivery", () => ep.forMessage(res.messageId)[0]);
  assert.equal(d.method, "POST", "default method");
  assert.equal(d.body, body);
  assert.equal(d.header("content-type"), "text/plain; charset=utf-8");
  ep.assertAllVerified();
});

test("publishJSON with delay: 2 is not delivered before ~2 s", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const published = Date.now();
  const res = await client.publishJSON({ url: `${ep.url}/delayed`, body: { delayed: true }, delay: 2, retries: 0 });
  const d = await waitFor("the delayed delivery", () => ep.forMessage(res.messageId)[0], { timeoutMs: 15000 });
  const waited = d.receivedAt - published;
  // 100 ms of tolerance for clock granularity between the two processes.
  assert.ok(waited >= 1900, `delivered after ${waited} ms, want >= 2000 ms`);
  assert.ok(waited < 12000, `delivered after ${waited} ms, far too late for a 2 s delay`);
  ep.assertAllVerified();
});

test("callback receives the §4.4 body for a delivery and is itself signed", { timeout: 30000 }, async (t) => {
  const answer = `target answer ${tag()}`;
  const ep = await startEndpoint(t, (d) =>
    d.path === "/target" ? { status: 201, body: answer, headers: { "X-Answer": "yes" } } : { status: 200, body: "cb ok" },
  );
  const target = `${ep.url}/target`;
  const callback = `${ep.url}/callback`;
  const res = await client.publishJSON({ url: target, body: { want: "callback" }, callback, retries: 2 });

  const cb = await waitFor("the callback delivery", () => ep.at("/callback")[0]);
  assert.equal(ep.at("/target").length, 1, "the target is delivered once");
  assert.equal(cb.method, "POST");
  assert.notEqual(cb.messageId, res.messageId, "the callback is a message of its own");

  const payload = JSON.parse(cb.body);
  assert.equal(payload.status, 201);
  assert.equal(typeof payload.body, "string");
  assert.equal(Buffer.from(payload.body, "base64").toString("utf8"), answer, "body = standard base64 of the endpoint's answer");
  assert.equal(atob(payload.body), answer, "atob (what the SDK uses) must decode it");
  assert.equal(payload.retried, 0);
  assert.equal(payload.maxRetries, 2);
  assert.equal(payload.sourceMessageId, res.messageId);
  assert.equal(payload.url, target);
  assert.equal(payload.method, "POST");
  assert.ok(payload.header && typeof payload.header === "object", "header map present");
  assert.deepEqual(payload.header["X-Answer"], ["yes"], "response headers: Go canonical names, array values");
  if (payload.sourceBody !== undefined) {
    assert.equal(atob(payload.sourceBody), JSON.stringify({ want: "callback" }), "sourceBody = base64 of the published body");
  }
  // The callback delivery was verified by the endpoint with url = the callback URL.
  assert.equal(cb.url, callback);
  ep.assertAllVerified();
});

test("batchJSON delivers every message once and answers in order", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const n = 5;
  const run = tag();
  const msgs = Array.from({ length: n }, (_, i) => ({
    url: `${ep.url}/batch/${i}`,
    body: { i, run },
    headers: { "X-Index": String(i) },
    retries: 0,
  }));
  const res = await client.batchJSON(msgs);
  assert.ok(Array.isArray(res), "batch answer is an array");
  assert.equal(res.length, n);
  const ids = res.map((r) => r.messageId);
  assert.equal(new Set(ids).size, n, `message ids must be distinct: ${ids}`);

  await waitFor(`${n} deliveries`, () => ids.every((id) => ep.forMessage(id).length > 0));
  // A message that is done is no longer listed; after that no further delivery can come.
  for (const id of ids) {
    await waitFor(`message ${id} to be done`, async () => {
      try {
        await client.messages.get(id);
        return false;
      } catch (e) {
        return e.status === 404;
      }
    });
  }
  for (let i = 0; i < n; i++) {
    const got = ep.forMessage(ids[i]);
    assert.equal(got.length, 1, `message ${i} delivered ${got.length} times`);
    assert.equal(got[0].path, `/batch/${i}`, `answer[${i}] must belong to the ${i}th message`);
    assert.equal(got[0].body, JSON.stringify({ i, run }));
    assert.equal(got[0].header("x-index"), String(i));
    assert.equal(got[0].header("content-type"), "application/json");
  }
  assert.equal(ep.deliveries.length, n, "no extra deliveries");
  ep.assertAllVerified();
});
