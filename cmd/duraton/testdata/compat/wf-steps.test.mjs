// Workflow runs with the official @upstash/workflow SDK: sequential steps, parallel groups,
// sleep and sleepUntil.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Host, newWfClient, tag, short, waitForRun, assertDeliveries, assertStepIds, loggedSteps, describeRun, parseOut } from "./wflib.mjs";

const client = newWfClient();

test("sequential: 3 steps, results flow step to step, 4 deliveries", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const exec = { s1: 0, s2: 0, s3: 0 };
  const seen = {};
  const url = host.workflow("/wf/seq", async (ctx) => {
    const r1 = await ctx.run("step-1", () => {
      exec.s1++;
      seen.payload = ctx.requestPayload;
      return { value: ctx.requestPayload.n + 1, who: "s1" };
    });
    const r2 = await ctx.run("step-2", () => {
      exec.s2++;
      seen.in2 = r1;
      return { value: r1.value * 2, prev: r1.who };
    });
    const r3 = await ctx.run("step-3", () => {
      exec.s3++;
      seen.in3 = r2;
      return `${r2.value}-done`;
    });
    seen.final = { r1, r2, r3, runId: ctx.workflowRunId, createdAt: ctx.workflowRunCreatedAt };
    return { final: r3 };
  });

  const t0 = tag();
  const payload = { n: 5, tag: t0, text: "héllo <b>&</b> ✓" };
  const { workflowRunId: runId } = await client.trigger({ url, body: payload, workflowRunId: `seq-${t0}` });
  assert.equal(runId, `wfr_seq-${t0}`, "trigger returns the requested run id");

  const run = await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/seq" });
  assert.deepEqual(exec, { s1: 1, s2: 1, s3: 1 }, "each step function runs exactly once");
  assert.deepEqual(seen.payload, payload, "step 1 sees the trigger payload");
  assert.deepEqual(seen.in2, { value: 6, who: "s1" }, "step 2 receives step 1's result");
  assert.deepEqual(seen.in3, { value: 12, prev: "s1" }, "step 3 receives step 2's result");
  assert.equal(seen.final?.r3, "12-done");
  assert.equal(seen.final?.runId, runId, "context.workflowRunId");
  assert.ok(seen.final?.createdAt > 0, `context.workflowRunCreatedAt = ${seen.final?.createdAt} (Upstash-Workflow-CreatedAt missing?)`);

  const ds = assertDeliveries(host, "/wf/seq", runId);
  assert.equal(ds.length, 4, `3 steps take exactly 4 deliveries (k+1): ${host.describe("/wf/seq", runId)}`);
  assert.ok(ds.every((d) => d.status === 200), host.describe("/wf/seq", runId));
  assert.equal(new Set(ds.map((d) => d.header("upstash-message-id"))).size, 4, "each delivery has its own message id");
  assert.ok(ds.every((d) => d.header("upstash-workflow-sdk-version") === "1"), "continuations carry Upstash-Workflow-Sdk-Version: 1");
  assert.ok(ds.every((d) => d.header("upstash-retried") === "0"), "no retries needed");

  // Logs: 3 sequential steps in order with their outputs, the run response recorded.
  assertStepIds(run, [1, 2, 3], "sequential");
  const steps = loggedSteps(run);
  assert.deepEqual(
    steps.map((s) => [s.stepId, s.stepName, s.stepType, s.callType]),
    [
      [1, "step-1", "Run", "step"],
      [2, "step-2", "Run", "step"],
      [3, "step-3", "Run", "step"],
    ],
    describeRun(run),
  );
  assert.ok(run.steps.every((g) => g.type === "sequential"), `all groups sequential: ${describeRun(run)}`);
  assert.deepEqual(parseOut(steps[0].out), { value: 6, who: "s1" }, "logged out of step 1");
  assert.equal(run.workflowUrl, url);
  assert.ok(run.workflowRunCreatedAt > 0 && run.workflowRunCompletedAt >= run.workflowRunCreatedAt, short(run));
  assert.deepEqual(parseOut(run.workflowRunResponse), { final: "12-done" }, "workflowRunResponse = the route's return value");
});

test("parallel: Promise.all of 3 runs, each branch once, the next step once", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const exec = { a: 0, b: 0, c: 0, after: 0 };
  let result;
  const url = host.workflow("/wf/par", async (ctx) => {
    const [a, b, c] = await Promise.all([
      ctx.run("branch-a", async () => {
        exec.a++;
        return { v: "A" };
      }),
      ctx.run("branch-b", async () => {
        exec.b++;
        return 2;
      }),
      ctx.run("branch-c", async () => {
        exec.c++;
        return "C";
      }),
    ]);
    const after = await ctx.run("after", () => {
      exec.after++;
      return { a, b, c };
    });
    result = after;
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: { p: tag() } });
  const run = await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/par" });
  assert.deepEqual(exec, { a: 1, b: 1, c: 1, after: 1 }, `each branch and the step after the group run once: ${host.describe("/wf/par", runId)}`);
  assert.deepEqual(result, { a: { v: "A" }, b: 2, c: "C" }, "branch results in order");
  assertDeliveries(host, "/wf/par", runId);

  assertStepIds(run, [1, 2, 3, 4], "parallel");
  const par = run.steps.find((g) => g.type === "parallel");
  assert.ok(par, `a "parallel" step group in the logs: ${JSON.stringify(run.steps)}`);
  assert.deepEqual(
    par.steps.map((s) => s.stepId).sort(),
    [1, 2, 3],
    "the parallel group holds the 3 branch results",
  );
  assert.ok(par.steps.every((s) => s.concurrent === 3), "parallel results carry concurrent=3");
  const last = loggedSteps(run).at(-1);
  assert.equal(last.stepName, "after");
});

test("sleep: the step after context.sleep(2) runs >= 2 s later", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  let times;
  const url = host.workflow("/wf/sleep", async (ctx) => {
    const before = await ctx.run("before", () => Date.now());
    await ctx.sleep("nap", 2);
    const after = await ctx.run("after", () => Date.now());
    times = { before, after };
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {} });
  const run = await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/sleep", timeoutMs: 25000 });
  const waited = times.after - times.before;
  assert.ok(waited >= 2000, `slept ${waited} ms, want >= 2000 ms`);
  assert.ok(waited < 12000, `slept ${waited} ms: far too long for a 2 s sleep`);
  assertDeliveries(host, "/wf/sleep", runId);
  assertStepIds(run, [1, 2, 3], "sleep");
  const nap = loggedSteps(run).find((s) => s.stepName === "nap");
  assert.equal(nap?.stepType, "SleepFor", describeRun(run));
});

test("sleepUntil: the step after context.sleepUntil(t) runs no earlier than t", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  let times;
  const url = host.workflow("/wf/until", async (ctx) => {
    // Computed inside a step so every replay sees the same target.
    const target = await ctx.run("target", () => Math.ceil(Date.now() / 1000) + 2);
    await ctx.sleepUntil("until", target);
    const after = await ctx.run("after", () => Date.now());
    times = { target, after };
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {} });
  const run = await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/until", timeoutMs: 25000 });
  assert.ok(times.after >= times.target * 1000, `resumed at ${times.after}, before the target ${times.target * 1000}`);
  assert.ok(times.after - times.target * 1000 < 10000, `resumed ${times.after - times.target * 1000} ms after the target: far too late`);
  assertDeliveries(host, "/wf/until", runId);
  const until = loggedSteps(run).find((s) => s.stepName === "until");
  assert.equal(until?.stepType, "SleepUntil", describeRun(run));
});
