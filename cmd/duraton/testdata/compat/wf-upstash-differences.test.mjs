// Behaviours of QStash that Upstash's own tests read, found while mapping them (see
// docs/compatibility.md): a context.call with an object body, the call result's
// Content-Length, and the run id in a waiter's timeoutHeaders.

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client as QStashClient } from "@upstash/qstash";
import { Host, env, api, tag, short, waitFor, waitForRun } from "./wflib.mjs";

const qstash = new QStashClient({ baseUrl: env.url, token: env.token });
const runIdOf = (host, path) => waitFor(`a run id on ${path}`, () => host.deliveries(path).find((d) => d.runId)?.runId);

describe("differences", { concurrency: true }, () => {
  // @upstash/workflow 1.3.3 context.call({url, body: {...}}) puts the object as is into the
  // /v2/batch entry ("body": {...}); Upstash's CI routes wait-for-event and auth/custom pass
  // objects. The target gets the object's JSON.
  test("context.call with an object body sends it to the target as JSON", { timeout: 30000 }, async (t) => {
    const host = await Host.start(t);
    const third = await Host.start(t);
    const target = third.plain("/target", ({ body }) => ({ status: 200, headers: { "content-type": "application/json" }, body }));
    let got;
    const url = host.workflow("/object-body", async (ctx) => {
      const r = await ctx.call("call", { url: target, method: "POST", body: { a: 1, b: ["x"] } });
      got = await ctx.run("keep", () => r.body);
    });
    await qstash.publishJSON({ url, body: "x" });
    const runId = await runIdOf(host, "/object-body");
    await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/object-body" });
    assert.deepEqual(JSON.parse(third.deliveries("/target")[0].body), { a: 1, b: ["x"] });
    assert.deepEqual(got, { a: 1, b: ["x"] });
  });

  // workflow-js src/integration.test.ts "call failure": the context.call result's header map
  // has the target's Content-Length (["29"] for a 29-byte body).
  test("context.call reports the target's Content-Length in the response header map", { timeout: 30000 }, async (t) => {
    const host = await Host.start(t);
    const third = await Host.start(t);
    const target = third.plain("/target", ({ body }) => ({ status: 400, body: `failing-response - ${body}` }));
    let got;
    const url = host.workflow("/content-length", async (ctx) => {
      const r = await ctx.call("failing call", { url: target, body: "my-payload", method: "POST" });
      got = await ctx.run("keep", () => r);
    });
    await qstash.publishJSON({ url, body: "x" });
    const runId = await runIdOf(host, "/content-length");
    await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/content-length" });
    assert.equal(got.status, 400);
    assert.equal(got.body, "failing-response - my-payload");
    assert.deepEqual(got.header["Content-Length"], ["29"], short(got.header));
  });

  // workflow-js src/integration.test.ts "should notify from inside a function": GET
  // /v2/waiters/{eventId} answers waiters whose timeoutHeaders carry the run id.
  test("GET /v2/waiters: timeoutHeaders carry Upstash-Workflow-Runid", { timeout: 30000 }, async (t) => {
    const host = await Host.start(t);
    const eventId = `waiter-${tag()}`;
    const url = host.workflow("/waiting", async (ctx) => {
      await ctx.waitForEvent("wait", eventId, { timeout: 20 });
    });
    await qstash.publishJSON({ url, body: "x" });
    const waiters = await waitFor("the waiter", async () => {
      const r = await api("GET", `/v2/waiters/${eventId}`);
      return r.json?.length ? r.json : undefined;
    });
    const runId = await runIdOf(host, "/waiting");
    assert.equal(waiters[0].timeoutUrl, url);
    assert.equal(waiters[0].timeoutHeaders["Upstash-Workflow-Runid"]?.[0], runId, short(waiters[0].timeoutHeaders));
    await api("DELETE", `/v2/workflows/runs/${runId}`);
  });
});
