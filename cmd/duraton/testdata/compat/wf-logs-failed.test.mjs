// What the run logs show of a run's deliveries whose steps are not recorded, as QStash's
// logs do: the delivery that failed the run as a "next" group (STEP_FAILED, with its error),
// a failed parallel branch inside its parallel group, and a child's result recorded in an
// invoker that failed before the child ended.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Host, newWfClient, tag, short, waitFor, waitForRun, describeRun, nextSteps, WorkflowNonRetryableError } from "./wflib.mjs";

const client = newWfClient();

test("a trigger at an endpoint that is not a workflow: RUN_FAILED, the next step failed with the detection error", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  const url = host.plain("/not-a-workflow", () => ({ status: 200, headers: { "content-type": "text/plain" }, body: `plain-${k}` }));
  const { workflowRunId: runId } = await client.trigger({ url, body: { k }, retries: 0 });
  const run = await waitForRun(runId, { want: "RUN_FAILED", host, path: "/not-a-workflow" });
  assert.equal(run.steps.length, 2, `the initial payload, then the failed next step: ${short(run.steps, 600)}`);
  assert.equal(run.steps[1].type, "next", short(run.steps[1]));
  assert.equal(run.steps[1].steps.length, 1);
  const next = run.steps[1].steps[0];
  assert.equal(next.state, "STEP_FAILED", short(next));
  assert.equal(next.errors?.length, 1, short(next));
  assert.equal(
    next.errors[0].error,
    "detected a non-workflow destination for trigger/invoke. make sure you are sending the request to the correct endpoint",
  );
  assert.equal(next.errors[0].body, `plain-${k}`, "the endpoint's answer is the error's body");
  assert.equal(next.errors[0].status, 200);
  assert.equal(typeof next.errors[0].time, "number");
});

test("a step failing with WorkflowNonRetryableError: the next step failed with status 489", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  const url = host.workflow("/wf/logs-489", async (ctx) => {
    await ctx.run("fine", () => "ok");
    await ctx.run("refuse", () => {
      throw new WorkflowNonRetryableError(`no-${k}`);
    });
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {}, retries: 2 });
  const run = await waitForRun(runId, { want: "RUN_FAILED", host, path: "/wf/logs-489" });
  const next = nextSteps(run);
  assert.equal(next.length, 1, describeRun(run));
  assert.equal(next[0].state, "STEP_FAILED");
  assert.equal(next[0].retries, 2, short(next[0]));
  assert.equal(next[0].errors?.[0]?.status, 489, short(next[0]));
  assert.match(next[0].errors[0].body, new RegExp(`no-${k}`));
  assert.equal(run.steps.at(-1).type, "next", "the next group comes last");
});

test("a call over the retry quota: the publish is refused with 412, the SDK fails the run with 489", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const target = host.plain("/never", () => ({ status: 200, body: "called" }));
  const url = host.workflow("/wf/logs-quota", async (ctx) => {
    await ctx.call("huge retry call", { url: target, method: "GET", retries: 1_000_000 });
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {}, retries: 0 });
  const run = await waitForRun(runId, { want: "RUN_FAILED", host, path: "/wf/logs-quota" });
  const next = nextSteps(run);
  assert.equal(next.length, 1, describeRun(run));
  assert.equal(next[0].state, "STEP_FAILED");
  assert.equal(next[0].errors?.[0]?.status, 489, short(next[0]));
  assert.equal(host.deliveries("/never").length, 0, "the call was never made");
});

test("a step throwing once retries are spent: the next step failed with status 500 and the step's name", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  const url = host.workflow("/wf/logs-500", async (ctx) => {
    await ctx.run("boom", () => {
      throw new Error(`boom-${k}`);
    });
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {}, retries: 0 });
  const run = await waitForRun(runId, { want: "RUN_FAILED", host, path: "/wf/logs-500" });
  const next = nextSteps(run);
  assert.equal(next.length, 1, describeRun(run));
  assert.equal(next[0].state, "STEP_FAILED");
  assert.equal(next[0].stepName, "boom", "named by the SDK's Upstash-Error-Step-Name");
  assert.equal(next[0].errors?.[0]?.status, 500, short(next[0]));
  assert.match(next[0].errors[0].body, new RegExp(`boom-${k}`));
});

test("an invoker that failed while its child ran: the child's result and the failed branch share the parallel group", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  host.workflow("/wf/inv-fail/child", async (ctx) => {
    await ctx.sleep("nap", 2);
    return await ctx.run("child-step", () => `child-${k}`);
  });
  const child = { workflowId: "child", routeFunction: undefined, options: {} };
  const url = host.workflow("/wf/inv-fail/parent", async (ctx) => {
    await Promise.all([
      ctx.invoke("invoke child", { workflow: child, body: {} }),
      ctx.run("failing step", async () => {
        await new Promise((r) => setTimeout(r, 300));
        throw new WorkflowNonRetryableError("step failed");
      }),
    ]);
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {}, retries: 0 });
  await waitForRun(runId, { want: "RUN_FAILED", host, path: "/wf/inv-fail/parent" });
  let run;
  await waitFor(
    "the child's result in the failed parent's parallel group",
    async () => {
      const r = await client.logs({ workflowRunId: runId });
      run = r.runs[0];
      const group = run?.steps?.[1];
      if (group?.type !== "parallel") return false;
      const invoke = group.steps.find((s) => s.stepName === "invoke child");
      const failing = group.steps.find((s) => s.stepName === "failing step");
      return invoke?.state === "STEP_SUCCESS" && failing?.state === "STEP_FAILED";
    },
    { timeoutMs: 20000, intervalMs: 200, describe: () => short(run?.steps, 800) },
  );
  assert.equal(run.workflowState, "RUN_FAILED", "the parent stays failed");
});
