// Runs started without an SDK: POST /v2/trigger/{url} over REST, as any language does it.
// The first delivery carries Upstash-Workflow-Unknown-Sdk; @upstash/workflow 1.3.3 answers it by
// re-publishing the run's init through /v2/batch (upstash-workflow-trigger-by-sdk: true), and
// the run must then go on as if the SDK had triggered it.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Host, api, tag, waitForRun, assertDeliveries, assertStepIds, parseOut } from "./wflib.mjs";

function threeSteps(host, path, seen) {
  return host.workflow(path, async (ctx) => {
    const a = await ctx.run("one", () => ({ n: ctx.requestPayload.n + 1 }));
    const b = await ctx.run("two", () => a.n * 2);
    const c = await ctx.run("three", () => `${b}!`);
    seen.payload = ctx.requestPayload;
    return { c };
  });
}

test("REST trigger: a 3-step route runs to RUN_SUCCESS", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const seen = {};
  const url = threeSteps(host, "/wf/rest", seen);
  const runId = `wfr_rest-${tag()}`;
  const r = await api("POST", `/v2/trigger/${url}`, {
    headers: { "Content-Type": "application/json", "Upstash-Workflow-RunId": runId },
    body: JSON.stringify({ n: 4 }),
  });
  assert.equal(r.status, 201, r.text);
  assert.equal(r.json.workflowRunId, runId);
  assert.ok(r.json.messageId, r.text);
  assert.equal(typeof r.json.workflowCreatedAt, "number", `workflowCreatedAt is a number: ${r.text}`);

  const run = await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/rest" });
  assertStepIds(run, [1, 2, 3], "REST trigger");
  assert.deepEqual(parseOut(run.workflowRunResponse), { c: "10!" });
  assert.deepEqual(seen.payload, { n: 4 }, "the route sees the REST body as its payload");
  const ds = assertDeliveries(host, "/wf/rest", runId);
  assert.ok(ds[0].header("upstash-workflow-unknown-sdk"), "the first delivery says the trigger had no SDK");
  assert.ok(ds.slice(1).every((d) => !d.header("upstash-workflow-unknown-sdk")), "only the first");
});

test("REST trigger with a 5 MiB payload (and the caller's own Unknown-Sdk header) runs to RUN_SUCCESS", { timeout: 60000 }, async (t) => {
  const host = await Host.start(t);
  let seenLen;
  const url = host.workflow("/wf/rest-large", async (ctx) => {
    const n = await ctx.run("measure", () => ctx.requestPayload.large.length);
    seenLen = n;
    return { n };
  });
  const large = "x".repeat(5 << 20);
  const runId = `wfr_rest-large-${tag()}`;
  const r = await api("POST", `/v2/trigger/${url}`, {
    headers: { "Content-Type": "application/json", "Upstash-Workflow-RunId": runId, "Upstash-Workflow-Unknown-Sdk": "true", "Upstash-Retries": "0" },
    body: JSON.stringify({ large }),
  });
  assert.equal(r.status, 201, r.text.slice(0, 300));
  const run = await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/rest-large", timeoutMs: 45000 });
  assert.deepEqual(parseOut(run.workflowRunResponse), { n: 5 << 20 });
  assert.equal(seenLen, 5 << 20);
});

test("REST trigger at an endpoint whose SDK does not adopt the run: RUN_FAILED with the protocol error", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  // An old SDK: it answers 200 with the protocol header but never re-publishes the init.
  const url = host.plain("/old-sdk", () => ({ status: 200, headers: { "content-type": "application/json", "upstash-workflow-sdk-version": "1" }, body: "{}" }));
  const runId = `wfr_rest-old-${tag()}`;
  const r = await api("POST", `/v2/trigger/${url}`, {
    headers: { "Content-Type": "application/json", "Upstash-Workflow-RunId": runId, "Upstash-Retries": "0" },
    body: JSON.stringify({ data: 1 }),
  });
  assert.equal(r.status, 201, r.text);
  const run = await waitForRun(runId, { want: "RUN_FAILED", host, path: "/old-sdk" });
  assert.equal(run.steps.length, 2, JSON.stringify(run.steps).slice(0, 400));
  assert.equal(run.steps[0].steps[0].state, "STEP_SUCCESS");
  assert.equal(run.steps[1].type, "next");
  assert.equal(run.steps[1].steps[0].errors?.[0]?.error, "trigger rest api is only usable with sdk versions after v1.0.0 major version");
});
