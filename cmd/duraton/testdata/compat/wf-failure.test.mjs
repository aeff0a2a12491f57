// Failures: retries exhausted and WorkflowNonRetryableError reach the failureFunction; the
// run logs (client.logs) show RUN_SUCCESS / RUN_FAILED.

import { test } from "node:test";
import assert from "node:assert/strict";
import {
  Host,
  newWfClient,
  tag,
  short,
  waitFor,
  waitForRun,
  assertDeliveries,
  WorkflowNonRetryableError,
} from "./wflib.mjs";

const client = newWfClient();

const isFailureCallback = (d) => d.header("upstash-workflow-failure-callback") === "true";

test("failureFunction runs once retries are exhausted (retries: 1, step throws)", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  let attempts = 0;
  const failures = [];
  const url = host.workflow(
    "/wf/fail",
    async (ctx) => {
      await ctx.run("ok-step", () => "fine");
      await ctx.run("boom-step", () => {
        attempts++;
        throw new Error(`boom-${k}`);
      });
    },
    {
      failureFunction: async ({ context, failStatus, failResponse, failHeaders }) => {
        failures.push({
          runId: context.workflowRunId,
          payload: context.requestPayload,
          url: context.url,
          failStatus,
          failResponse,
          failHeaders,
          labels: context.labels,
          user: context.headers.get("x-wf-user"),
        });
        return `handled-${k}`;
      },
    },
  );
  const payload = { k, nested: { a: [1, 2] } };
  const { workflowRunId: runId } = await client.trigger({
    url,
    body: payload,
    retries: 1,
    retryDelay: "100",
    label: `fail-${k}`,
    headers: { "x-wf-user": `u-${k}` },
  });
  await waitForRun(runId, { want: "RUN_FAILED", host, path: "/wf/fail" });
  await waitFor("the failureFunction call", () => failures.length > 0, { describe: () => host.describe("/wf/fail", runId) });
  assert.equal(attempts, 2, `retries: 1 → 2 attempts of the failing step (${host.describe("/wf/fail", runId)})`);
  const f = failures[0];
  assert.equal(f.runId, runId);
  assert.equal(f.failStatus, 500, short(f));
  assert.match(f.failResponse, new RegExp(`boom-${k}`), short(f));
  assert.deepEqual(f.payload, payload, "failure context carries the run's initial payload (InitialBody)");
  assert.equal(f.url, url, "failure context url");
  assert.deepEqual(f.labels, [`fail-${k}`], "label reaches the failure callback");
  assert.equal(f.user, `u-${k}`, "user header reaches the failure callback");

  const ds = assertDeliveries(host, "/wf/fail", runId);
  const fcs = ds.filter(isFailureCallback);
  assert.equal(fcs.length, 1, `exactly one failure-callback delivery (it succeeded): ${host.describe("/wf/fail", runId)}`);
  assert.equal(fcs[0].status, 200);
  assert.ok(ds.filter((d) => !isFailureCallback(d) && d.header("upstash-retried") === "1").length === 1, "one retry delivery");
  // The failed answer's headers are reported as the endpoint sent them, Content-Length too.
  const failed = ds.filter((d) => !isFailureCallback(d)).at(-1);
  assert.deepEqual(f.failHeaders?.["Content-Length"], [String(Buffer.byteLength(failed.respBody))], `failHeaders: ${short(f.failHeaders)}`);
  await waitFor("failureFunction settles", () => fcs[0].respBody !== undefined);
  assert.match(fcs[0].respBody, new RegExp(`handled-${k}`), "the failure function's result is the callback answer");
  // The failure function ran exactly once.
  assert.equal(failures.length, 1);
});

test("WorkflowNonRetryableError: no retries, straight to failureFunction, RUN_FAILED", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  let attempts = 0;
  const failures = [];
  const url = host.workflow(
    "/wf/nonretry",
    async (ctx) => {
      await ctx.run("stop-step", () => {
        attempts++;
        throw new WorkflowNonRetryableError(`stop-${k}`);
      });
    },
    {
      failureFunction: async ({ context, failStatus, failResponse }) => {
        failures.push({ runId: context.workflowRunId, failStatus, failResponse });
      },
    },
  );
  const { workflowRunId: runId } = await client.trigger({ url, body: {}, retries: 3, retryDelay: "100" });
  await waitForRun(runId, { want: "RUN_FAILED", host, path: "/wf/nonretry" });
  await waitFor("the failureFunction call", () => failures.length > 0, { describe: () => host.describe("/wf/nonretry", runId) });
  const ds = assertDeliveries(host, "/wf/nonretry", runId);
  const stepDeliveries = ds.filter((d) => !isFailureCallback(d));
  const failed = stepDeliveries.filter((d) => d.status === 489);
  assert.equal(failed.length, 1, `the 489 answer is not retried: ${host.describe("/wf/nonretry", runId)}`);
  assert.equal(failed[0].header("upstash-retried"), "0");
  assert.equal(attempts, 1, "the step ran once");
  assert.equal(failures.length, 1);
  assert.equal(failures[0].runId, runId);
  assert.match(failures[0].failResponse, new RegExp(`stop-${k}`), short(failures[0]));
  assert.equal(failures[0].failStatus, 489, short(failures[0]));
});

test("client.logs shows RUN_SUCCESS and RUN_FAILED runs, with state and label filters", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  const url = host.workflow("/wf/logs", async (ctx) => {
    const v = await ctx.run("maybe-fail", () => {
      if (ctx.requestPayload.fail) throw new Error("asked to fail");
      return "ok";
    });
    return { v, k };
  });
  const [ok, bad] = await client.trigger([
    { url, body: { fail: false }, label: `logs-${k}` },
    { url, body: { fail: true }, label: `logs-${k}`, retries: 0 },
  ]);
  await waitForRun(ok.workflowRunId, { want: "RUN_SUCCESS", host, path: "/wf/logs" });
  await waitForRun(bad.workflowRunId, { want: "RUN_FAILED", host, path: "/wf/logs" });

  const one = await client.logs({ filter: { workflowRunId: ok.workflowRunId } });
  assert.equal(one.runs.length, 1, short(one));
  const r = one.runs[0];
  assert.equal(r.workflowRunId, ok.workflowRunId);
  assert.equal(r.workflowState, "RUN_SUCCESS");
  assert.equal(r.workflowUrl, url);
  assert.deepEqual(JSON.parse(r.workflowRunResponse), { v: "ok", k }, short(r));
  assert.ok(r.workflowRunCompletedAt >= r.workflowRunCreatedAt, short(r));

  const failedOnly = await client.logs({ filter: { state: "RUN_FAILED", workflowUrl: url } });
  assert.deepEqual(
    failedOnly.runs.map((x) => x.workflowRunId),
    [bad.workflowRunId],
    `state=RUN_FAILED&workflowUrl=…: ${short(failedOnly.runs.map((x) => [x.workflowRunId, x.workflowState]))}`,
  );
  const byLabel = await client.logs({ filter: { label: `logs-${k}` } });
  assert.deepEqual(
    byLabel.runs.map((x) => x.workflowRunId).sort(),
    [ok.workflowRunId, bad.workflowRunId].sort(),
    "label filter",
  );
  assert.ok(byLabel.runs.every((x) => x.label === `logs-${k}`), short(byLabel.runs.map((x) => x.label)));

  // Pagination: count=1 gives a cursor that reaches the second run.
  const p1 = await client.logs({ count: 1, filter: { label: `logs-${k}` } });
  assert.equal(p1.runs.length, 1, short(p1));
  assert.ok(p1.cursor, `a cursor when more runs match: ${short(p1)}`);
  const p2 = await client.logs({ count: 1, cursor: p1.cursor, filter: { label: `logs-${k}` } });
  assert.equal(p2.runs.length, 1, short(p2));
  assert.notEqual(p2.runs[0].workflowRunId, p1.runs[0].workflowRunId, "the cursor moves on");
});
