// Workflow DLQ: a failed run is listed by client.dlq.list(); client.dlq.resume continues it
// from the failed step, client.dlq.restart runs it again from the start, both to success.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Host, newWfClient, tag, short, waitFor, waitForRun, assertDeliveries, loggedSteps, describeRun } from "./wflib.mjs";

const client = newWfClient();

/** Mounts a 2-step workflow whose second step fails on its first execution only. */
function flakyWorkflow(host, path) {
  const exec = { s1: 0, s2: 0, done: [] };
  const url = host.workflow(path, async (ctx) => {
    const a = await ctx.run("s1", () => {
      exec.s1++;
      return `a-${ctx.requestPayload.k}`;
    });
    const b = await ctx.run("s2", () => {
      exec.s2++;
      if (exec.s2 === 1) throw new Error("transient failure");
      return `b-${a}`;
    });
    exec.done.push({ runId: ctx.workflowRunId, a, b, payload: ctx.requestPayload });
    return b;
  });
  return { url, exec };
}

/** Waits for the run's DLQ entry in client.dlq.list() and returns it. */
async function dlqEntry(runId, host, path) {
  return waitFor(
    `a DLQ entry for ${runId}`,
    async () => {
      const { messages } = await client.dlq.list({ filter: { workflowRunId: runId } });
      return messages.find((m) => m.workflowRunId === runId);
    },
    { timeoutMs: 15000, intervalMs: 150, describe: () => host.describe(path, runId) },
  );
}

test("dlq.list shows the failed run; dlq.resume continues it from the failed step to success", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  const { url, exec } = flakyWorkflow(host, "/wf/dlq-resume");
  const { workflowRunId: runId } = await client.trigger({ url, body: { k }, retries: 0, label: `dlq-${k}` });
  await waitForRun(runId, { want: "RUN_FAILED", host, path: "/wf/dlq-resume" });
  assert.deepEqual([exec.s1, exec.s2], [1, 1]);

  const entry = await dlqEntry(runId, host, "/wf/dlq-resume");
  assert.equal(typeof entry.dlqId, "string", short(entry));
  assert.ok(entry.dlqId.length > 0);
  assert.equal(entry.workflowUrl, url, short(entry));
  assert.equal(entry.responseStatus, 500, short(entry));
  assert.ok(entry.workflowCreatedAt > 0, short(entry));
  const all = await client.dlq.list();
  assert.ok(all.messages.some((m) => m.dlqId === entry.dlqId), "the unfiltered list contains the entry too");
  const byLabel = await client.dlq.list({ filter: { label: `dlq-${k}` } });
  assert.deepEqual(byLabel.messages.map((m) => m.dlqId), [entry.dlqId], "label filter");

  const res = await client.dlq.resume(entry.dlqId);
  assert.ok(Array.isArray(res.workflowRuns) && res.workflowRuns.length === 1, short(res));
  const resumedId = res.workflowRuns[0].workflowRunId;
  assert.equal(typeof resumedId, "string", short(res));
  const run = await waitForRun(resumedId, { want: "RUN_SUCCESS", ignore: ["RUN_FAILED"], host, path: "/wf/dlq-resume" });
  assert.equal(exec.s1, 1, "resume does not re-run the step that had succeeded");
  assert.equal(exec.s2, 2, "resume re-runs the failed step");
  const done = exec.done.at(-1);
  assert.deepEqual(done, { runId: resumedId, a: `a-${k}`, b: `b-a-${k}`, payload: { k } }, short(done));
  assert.deepEqual(
    loggedSteps(run).map((s) => s.stepName),
    ["s1", "s2"],
    `the resumed run carries s1 over and records s2 once: ${describeRun(run)}`,
  );
  assertDeliveries(host, "/wf/dlq-resume", resumedId);

  await waitFor("the resumed entry to leave the DLQ", async () => {
    const { messages } = await client.dlq.list({ filter: { workflowRunId: runId } });
    return !messages.some((m) => m.dlqId === entry.dlqId);
  });
});

test("dlq.restart runs the failed run again from the beginning to success", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  const { url, exec } = flakyWorkflow(host, "/wf/dlq-restart");
  const { workflowRunId: runId } = await client.trigger({ url, body: { k }, retries: 0 });
  await waitForRun(runId, { want: "RUN_FAILED", host, path: "/wf/dlq-restart" });
  const entry = await dlqEntry(runId, host, "/wf/dlq-restart");

  const res = await client.dlq.restart([entry.dlqId]);
  assert.ok(Array.isArray(res.workflowRuns) && res.workflowRuns.length === 1, short(res));
  const restartedId = res.workflowRuns[0].workflowRunId;
  const run = await waitForRun(restartedId, { want: "RUN_SUCCESS", ignore: ["RUN_FAILED"], host, path: "/wf/dlq-restart" });
  assert.equal(exec.s1, 2, "restart runs the first step again");
  assert.equal(exec.s2, 2);
  assert.deepEqual(exec.done.at(-1), { runId: restartedId, a: `a-${k}`, b: `b-a-${k}`, payload: { k } }, "same initial payload");
  assert.deepEqual(loggedSteps(run).map((s) => s.stepName), ["s1", "s2"], describeRun(run));
  assertDeliveries(host, "/wf/dlq-restart", restartedId);
});

test("a failed failure function: the DLQ lists the run's entry once, and retryFailureFunction re-runs it", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  const calls = [];
  const url = host.workflow(
    "/wf/dlq-fail-fn",
    async (ctx) => {
      await ctx.run("boom", () => {
        throw new Error(`boom-${k}`);
      });
    },
    {
      failureFunction: async ({ context, failStatus }) => {
        calls.push({ runId: context.workflowRunId, failStatus });
        if (calls.length === 1) throw new Error(`failure function fails once-${k}`);
        return `handled-${k}`;
      },
    },
  );
  const { workflowRunId: runId } = await client.trigger({ url, body: { k }, retries: 0 });
  await waitForRun(runId, { want: "RUN_FAILED", host, path: "/wf/dlq-fail-fn" });
  await waitFor("the failure function's first call", () => calls.length === 1);

  const entry = await waitFor(
    "the run's DLQ entry with its failure callback failed",
    async () => {
      const { messages } = await client.dlq.list({ filter: { workflowRunId: runId } });
      const mine = messages.filter((m) => m.workflowRunId === runId);
      return mine.length > 0 && mine.every((m) => m.failureCallbackInfo?.state === "CALLBACK_FAIL") ? mine : undefined;
    },
    { timeoutMs: 15000, intervalMs: 150, describe: () => host.describe("/wf/dlq-fail-fn", runId) },
  );
  assert.equal(entry.length, 1, `one entry per failed run, not one for its failure callback too: ${short(entry)}`);
  assert.equal(entry[0].responseStatus, 500, short(entry[0]));
  assert.equal(entry[0].workflowUrl, url);

  const res = await client.dlq.retryFailureFunction({ dlqId: entry[0].dlqId });
  assert.equal(res.workflowRunId, runId, short(res));
  await waitFor("the failure function's second call", () => calls.length === 2, { describe: () => host.describe("/wf/dlq-fail-fn", runId) });
  assert.deepEqual(calls.map((c) => c.failStatus), [500, 500], "both calls see the run's failed answer");
  await waitFor("the callback state to become CALLBACK_SUCCESS", async () => {
    const { messages } = await client.dlq.list({ filter: { workflowRunId: runId } });
    return messages.find((m) => m.dlqId === entry[0].dlqId)?.failureCallbackInfo?.state === "CALLBACK_SUCCESS";
  });
});
