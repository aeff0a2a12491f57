// context.call: duraton performs the outbound HTTP request to a second local server and calls
// the workflow back with the status, headers and body.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Host, newWfClient, tag, short, waitForRun, assertDeliveries, loggedSteps, describeRun } from "./wflib.mjs";

const client = newWfClient();

test("call: POST with method, body and header reaches a second server; status, body, header come back", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const third = await Host.start(t);
  const k = tag();
  const echoUrl = third.plain("/echo", ({ req, body }) => ({
    status: 201,
    headers: { "content-type": "application/json", "X-Third-Party": "yes-" + k },
    body: JSON.stringify({ received: JSON.parse(body || "null"), hdr: req.headers["x-call-hdr"] ?? null, method: req.method }),
  }));
  let res;
  const url = host.workflow("/wf/call", async (ctx) => {
    const r = await ctx.call("call-post", {
      url: echoUrl,
      method: "PATCH",
      body: JSON.stringify({ q: 1, k }),
      headers: { "content-type": "application/json", "x-call-hdr": "h-" + k },
    });
    res = await ctx.run("after", () => r);
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: { k } });
  const run = await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/call" });

  const calls = third.deliveries("/echo");
  assert.equal(calls.length, 1, "the third party is called once");
  const c = calls[0];
  assert.equal(c.method, "PATCH", "method");
  assert.deepEqual(JSON.parse(c.body), { q: 1, k }, "body");
  assert.equal(c.header("x-call-hdr"), "h-" + k, "forwarded call header");
  assert.match(c.header("content-type") ?? "", /application\/json/);
  assert.ok(!Object.keys(c.headers).some((h) => h.startsWith("upstash-forward-")), `no Upstash-Forward- prefix leaks: ${Object.keys(c.headers)}`);
  assert.equal(c.header("authorization"), undefined, "the API token must never reach the third party");

  assert.equal(res?.status, 201, short(res));
  assert.deepEqual(res.body, { received: { q: 1, k }, hdr: "h-" + k, method: "PATCH" }, "JSON body comes back parsed");
  const hk = Object.keys(res.header ?? {}).find((h) => h.toLowerCase() === "x-third-party");
  assert.ok(hk, `response header in ${short(res.header)}`);
  assert.deepEqual(res.header[hk], ["yes-" + k], "header values are arrays");
  assert.ok(res.header["X-Third-Party"], `header names in Go canonical form: ${Object.keys(res.header)}`);

  const ds = assertDeliveries(host, "/wf/call", runId);
  const cbs = ds.filter((d) => d.header("upstash-workflow-callback") === "true");
  assert.equal(cbs.length, 1, `one callback delivery: ${host.describe("/wf/call", runId)}`);
  assert.equal(cbs[0].header("upstash-workflow-sdk-version"), undefined, "no Upstash-Workflow-Sdk-Version on a callback delivery");
  const callStep = loggedSteps(run).find((s) => s.stepName === "call-post");
  assert.equal(callStep?.stepType, "Call", describeRun(run));
});

test("call: a 404 from the target reaches the workflow as status and body", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const third = await Host.start(t);
  const k = tag();
  const nfUrl = third.plain("/missing", () => ({ status: 404, headers: { "content-type": "text/plain" }, body: "nope-" + k }));
  let res;
  const url = host.workflow("/wf/call404", async (ctx) => {
    const r = await ctx.call("call-404", { url: nfUrl, method: "GET", retries: 0 });
    res = await ctx.run("after", () => ({ status: r.status, body: r.body }));
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {} });
  await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/call404" });
  assert.deepEqual(res, { status: 404, body: "nope-" + k });
  assert.equal(third.deliveries("/missing").length, 1, "retries: 0 → one attempt");
  assertDeliveries(host, "/wf/call404", runId);
});

test("call: with retries: 1 a failing first attempt is retried and the success reaches the workflow", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const third = await Host.start(t);
  let attempts = 0;
  const flakyUrl = third.plain("/flaky", () => {
    attempts++;
    return attempts === 1
      ? { status: 503, headers: { "content-type": "text/plain" }, body: "first attempt fails" }
      : { status: 200, headers: { "content-type": "text/plain" }, body: "second attempt ok" };
  });
  let res;
  const url = host.workflow("/wf/callretry", async (ctx) => {
    const r = await ctx.call("call-flaky", { url: flakyUrl, method: "POST", body: "x", retries: 1, retryDelay: "200" });
    res = await ctx.run("after", () => ({ status: r.status, body: r.body }));
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {} });
  await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/callretry" });
  assert.equal(attempts, 2, "the target is called twice");
  assert.deepEqual(res, { status: 200, body: "second attempt ok" });
  const ds = assertDeliveries(host, "/wf/callretry", runId);
  const cbs = ds.filter((d) => d.header("upstash-workflow-callback") === "true");
  assert.equal(cbs.length, 1, `one callback, after the last attempt: ${host.describe("/wf/callretry", runId)}`);
});

test("call: with retries: 1 and both attempts failing, the workflow gets one callback with the last answer", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const third = await Host.start(t);
  const k = tag();
  const denyUrl = third.plain("/deny", () => ({ status: 401, headers: { "content-type": "text/plain", "x-failing": k }, body: "failing request" }));
  let res;
  const url = host.workflow("/wf/callfail", async (ctx) => {
    const r = await ctx.call("call-deny", { url: denyUrl, method: "PATCH", retries: 1, retryDelay: "100" });
    res = await ctx.run("after", () => ({ status: r.status, body: r.body, failing: r.header["X-Failing"]?.[0] }));
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {}, retries: 0 });
  await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/callfail" });
  assert.equal(third.deliveries("/deny").length, 2, "retries: 1 → two attempts");
  assert.deepEqual(res, { status: 401, body: "failing request", failing: k });
  const ds = assertDeliveries(host, "/wf/callfail", runId);
  const cbs = ds.filter((d) => d.header("upstash-workflow-callback") === "true");
  assert.equal(cbs.length, 1, `one callback, not one per attempt: ${host.describe("/wf/callfail", runId)}`);
  // trigger, the call's step, the callback, the run's last step: four deliveries.
  assert.equal(ds.length, 4, host.describe("/wf/callfail", runId));
});
