// context.invoke: a parent run starts a child run and resumes with its result, failure or
// cancellation.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Host, newWfClient, tag, short, waitFor, waitForRun, assertDeliveries, loggedSteps, describeRun } from "./wflib.mjs";

const client = newWfClient();

/**
 * Mounts a child workflow at <dir>/<id> and returns the InvokableWorkflow object that
 * context.invoke needs: the SDK derives the child URL by replacing the last path segment of
 * the parent URL with workflowId (what serveMany sets up).
 */
function mountChild(host, dir, id, routeFunction, options = {}) {
  host.workflow(`${dir}/${id}`, routeFunction, options);
  return { routeFunction, options, workflowId: id };
}

/** The child run id the parent's deliveries know nothing about: find it via the child's deliveries. */
function childRunIds(host, path) {
  return [...new Set(host.deliveries(path).map((d) => d.runId).filter(Boolean))];
}

test("invoke: a successful child's return value reaches the parent", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  let childSaw;
  const child = mountChild(host, "/wf/inv", "child-ok", async (ctx) => {
    const v = await ctx.run("child-step", () => {
      childSaw = { payload: ctx.requestPayload, hdr: ctx.headers.get("x-invoke-hdr") };
      return ctx.requestPayload.n * 2;
    });
    return { doubled: v, k };
  });
  let parentResult;
  const url = host.workflow("/wf/inv/parent-ok", async (ctx) => {
    const before = await ctx.run("before", () => 21);
    const r = await ctx.invoke("invoke-child", { workflow: child, body: { n: before }, headers: { "x-invoke-hdr": "ih-" + k } });
    parentResult = await ctx.run("after", () => r);
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {} });
  const run = await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/inv/parent-ok", timeoutMs: 30000, extra: () => "child: " + host.describe("/wf/inv/child-ok") });
  assert.deepEqual(childSaw?.payload, { n: 21 }, "the child sees the invoke body as its payload (not the envelope)");
  assert.equal(childSaw?.hdr, "ih-" + k, "invoke headers reach the child");
  assert.deepEqual(parentResult?.body, { doubled: 42, k }, `child's return value: ${short(parentResult)}`);
  assert.equal(parentResult?.isFailed, false, short(parentResult));
  assert.equal(parentResult?.isCanceled, false, short(parentResult));
  assertDeliveries(host, "/wf/inv/parent-ok", runId);

  const childIds = childRunIds(host, "/wf/inv/child-ok");
  assert.equal(childIds.length, 1, `one child run: ${childIds}`);
  assert.notEqual(childIds[0], runId);
  assertDeliveries(host, "/wf/inv/child-ok", childIds[0]);
  const childRun = await waitForRun(childIds[0], { want: "RUN_SUCCESS" });
  assert.ok(childRun, "the child run is in the logs");
  const inv = loggedSteps(run).find((s) => s.stepName === "invoke-child");
  assert.equal(inv?.stepType, "Invoke", describeRun(run));
});

test("invoke: a failing child resumes the parent with isFailed", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  let childAttempts = 0;
  const child = mountChild(host, "/wf/inv", "child-fail", async (ctx) => {
    await ctx.run("child-throws", () => {
      childAttempts++;
      throw new Error("child failure");
    });
  });
  let parentResult;
  const url = host.workflow("/wf/inv/parent-fail", async (ctx) => {
    const r = await ctx.invoke("invoke-failing", { workflow: child, body: { x: 1 }, retries: 0 });
    parentResult = await ctx.run("after", () => r);
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {} });
  await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/inv/parent-fail", timeoutMs: 30000, extra: () => "child: " + host.describe("/wf/inv/child-fail") });
  assert.equal(parentResult?.isFailed, true, short(parentResult));
  assert.equal(parentResult?.isCanceled, false, short(parentResult));
  assert.equal(parentResult?.body, undefined, "no body for a failed child");
  assert.equal(childAttempts, 1, "retries: 0 on the invoke → one attempt");
  const [childId] = childRunIds(host, "/wf/inv/child-fail");
  assert.ok(childId, host.describe("/wf/inv/child-fail"));
  await waitForRun(childId, { want: "RUN_FAILED" });
  assertDeliveries(host, "/wf/inv/parent-fail", runId);
});

test("invoke: a child that cancels itself resumes the parent with isCanceled", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  let afterCancel = 0;
  const child = mountChild(host, "/wf/inv", "child-cancel", async (ctx) => {
    await ctx.run("child-first", () => "one");
    await ctx.cancel();
    await ctx.run("child-never", () => afterCancel++);
  });
  let parentResult;
  const url = host.workflow("/wf/inv/parent-cancel", async (ctx) => {
    const r = await ctx.invoke("invoke-cancelling", { workflow: child, body: {} });
    parentResult = await ctx.run("after", () => r);
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {} });
  await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/inv/parent-cancel", timeoutMs: 30000, extra: () => "child: " + host.describe("/wf/inv/child-cancel") });
  assert.equal(parentResult?.isCanceled, true, short(parentResult));
  assert.equal(parentResult?.isFailed, false, short(parentResult));
  assert.equal(afterCancel, 0, "nothing runs after context.cancel()");
  const [childId] = childRunIds(host, "/wf/inv/child-cancel");
  assert.ok(childId, host.describe("/wf/inv/child-cancel"));
  await waitForRun(childId, { want: "RUN_CANCELED" });
  assertDeliveries(host, "/wf/inv/parent-cancel", runId);
  await waitFor("child deliveries settled", () => host.deliveries("/wf/inv/child-cancel").every((d) => d.status !== undefined));
});
