// Labels and user headers given at trigger time reach EVERY delivery of the run: steps,
// parallel branches, sleep resumptions, call callbacks and wait-timeout resumptions
// (the failure-callback delivery is covered in wf-failure.test.mjs).

import { test } from "node:test";
import assert from "node:assert/strict";
import { Host, newWfClient, tag, short, waitForRun, assertDeliveries } from "./wflib.mjs";

const client = newWfClient();

test("label + user headers from the trigger are present on every delivery", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const third = await Host.start(t);
  const k = tag();
  const target = third.plain("/target", () => ({ status: 200, headers: { "content-type": "text/plain" }, body: "called" }));
  const seen = [];
  const url = host.workflow("/wf/headers", async (ctx) => {
    const note = () => seen.push({ labels: ctx.labels, user: ctx.headers.get("x-wf-user"), second: ctx.headers.get("x-wf-second") });
    await ctx.run("first", () => note());
    await Promise.all([ctx.run("par-a", () => note()), ctx.run("par-b", () => note())]);
    await ctx.sleep("nap", 1);
    const c = await ctx.call("call", { url: target, method: "POST", body: "x" });
    await ctx.waitForEvent("wait", `never-${k}`, { timeout: 1 });
    await ctx.run("last", () => {
      note();
      return c.status;
    });
  });
  const labels = [`lbl-${k}`, "second-label"];
  const { workflowRunId: runId } = await client.trigger({
    url,
    body: { k },
    label: labels,
    headers: { "X-Wf-User": `u-${k}`, "x-wf-second": "two, values" },
  });
  await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/headers", timeoutMs: 30000 });

  const ds = assertDeliveries(host, "/wf/headers", runId);
  assert.ok(ds.length >= 9, `a run with run, parallel, sleep, call and wait: ${host.describe("/wf/headers", runId)}`);
  assert.ok(ds.some((d) => d.header("upstash-workflow-callback") === "true"), "the call callback delivery is among them");
  for (const d of ds) {
    const what = `delivery ${d.header("upstash-message-id")}${d.header("upstash-workflow-callback") ? " (call callback)" : ""}`;
    assert.equal(d.header("x-wf-user"), `u-${k}`, `${what}: user header; headers: ${short(d.headers, 800)}`);
    assert.equal(d.header("x-wf-second"), "two, values", `${what}: second user header`);
    assert.equal(d.header("upstash-label"), labels.join(","), `${what}: Upstash-Label`);
    assert.equal(d.header("upstash-forward-x-wf-user"), undefined, `${what}: Upstash-Forward- prefix stripped`);
  }
  assert.ok(seen.length >= 4, short(seen));
  for (const s of seen) assert.deepEqual(s, { labels, user: `u-${k}`, second: "two, values" }, "context.labels / context.headers");
  assert.equal(third.deliveries("/target").length, 1, "the call target is called once");
});
