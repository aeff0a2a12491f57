// Cancellation: context.cancel() from inside a run, and bulk client.cancel({ ids }).

import { test } from "node:test";
import assert from "node:assert/strict";
import { Host, newWfClient, tag, short, sleep, waitFor, waitForRun, readLogs, describeRun, assertDeliveries, loggedSteps } from "./wflib.mjs";

const client = newWfClient();

test("context.cancel(): the run ends RUN_CANCELED and nothing after it runs", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const exec = { first: 0, never: 0 };
  const url = host.workflow("/wf/selfcancel", async (ctx) => {
    await ctx.run("first", () => ++exec.first);
    await ctx.cancel();
    await ctx.run("never", () => ++exec.never);
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {} });
  const run = await waitForRun(runId, { want: "RUN_CANCELED", host, path: "/wf/selfcancel" });
  assert.deepEqual(exec, { first: 1, never: 0 });
  assert.deepEqual(loggedSteps(run).map((s) => s.stepName), ["first"], describeRun(run));
  // The run ends at the cancel's commit, before the delivery that cancelled it answers.
  await waitFor("the deliveries of the run answered", () => host.deliveries("/wf/selfcancel", runId).every((d) => d.status !== undefined), {
    timeoutMs: 10000,
    describe: () => host.describe("/wf/selfcancel", runId),
  });
  const ds = assertDeliveries(host, "/wf/selfcancel", runId);
  assert.ok(ds.every((d) => d.status === 200), host.describe("/wf/selfcancel", runId));
});

test("client.cancel({ ids }): waiting runs are cancelled and their timers dropped", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  let after = 0;
  let otherDone = false;
  const url = host.workflow("/wf/bulkcancel", async (ctx) => {
    await ctx.run("first", () => ctx.requestPayload.i);
    // A short timeout: if cancel left the waiter/timer behind, "after" would run ~3 s later.
    await ctx.waitForEvent("park", `park-${k}-${ctx.requestPayload.i}`, { timeout: 3 });
    await ctx.run("after", () => {
      after++;
      if (ctx.requestPayload.i === 99) otherDone = true;
    });
  });
  const runs = await client.trigger([
    { url, body: { i: 1 } },
    { url, body: { i: 2 } },
    { url, body: { i: 99 } }, // not cancelled: proves the timer path works in this test
  ]);
  const [a, b, c] = runs.map((r) => r.workflowRunId);
  // A run is parked at the wait once its second delivery (the one that registered the wait
  // through POST /v2/wait) has been answered 200.
  const parked = (id) => host.deliveries("/wf/bulkcancel", id).filter((d) => d.status === 200).length >= 2;
  await waitFor("both runs parked at waitForEvent", () => parked(a) && parked(b), {
    timeoutMs: 15000,
    describe: () => host.describe("/wf/bulkcancel"),
  });
  const started = Date.now();
  const res = await client.cancel({ ids: [a, b] });
  assert.deepEqual(res, { cancelled: 2 }, short(res));

  const ra = await waitForRun(a, { want: "RUN_CANCELED" });
  const rb = await waitForRun(b, { want: "RUN_CANCELED" });
  await waitForRun(c, { want: "RUN_SUCCESS", host, path: "/wf/bulkcancel" });
  assert.ok(otherDone, "the run that was not cancelled resumed after its timeout");
  // Give a dropped-or-not timer of the cancelled runs the same chance to fire (3 s timeout).
  const left = 3500 - (Date.now() - started);
  if (left > 0) await sleep(left);
  assert.equal(after, 1, `only the uncancelled run reaches "after" (${after} times)`);
  for (const [id, r] of [
    [a, ra],
    [b, rb],
  ]) {
    assert.ok(!loggedSteps(await readLogs(id)).some((s) => s.stepName === "after"), describeRun(r));
    assert.ok(host.deliveries("/wf/bulkcancel", id).length >= 1);
    assertDeliveries(host, "/wf/bulkcancel", id);
  }
  const again = await client.cancel({ ids: [a] });
  assert.equal(again.cancelled, 0, `cancelling a cancelled run again cancels nothing: ${short(again)}`);
});
