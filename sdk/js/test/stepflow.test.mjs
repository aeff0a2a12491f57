// ctx.step.run(name, fn, { flowControl }): the step runs in a delivery of its own, gated
// under its key alone; ctx.flowControl says what a delivery was admitted under.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow, runFor } from "../dist/index.js";
import { client, host, runEnded, out, tag, short, sleep, Gauge } from "./lib.mjs";

test("step.run with flowControl: one step of three runs at a time, the rest free", { timeout: 60000 }, async (t) => {
  const k = tag();
  const gauge = new Gauge();
  const free = new Gauge();
  const seen = [];
  const wf = workflow({
    name: `stepfc.${k}`,
    triggers: [`stepfc.${k}`],
    handler: async (ctx) => {
      const before = await ctx.step.run("before", () => free.around("before", async () => {
        await sleep(300);
        return ctx.flowControl ?? null;
      }));
      const charged = await ctx.step.run(
        "charge",
        () => gauge.around("charge", async () => {
          seen.push(ctx.flowControl);
          await sleep(300);
          return `charged ${ctx.event.data.n}`;
        }),
        { flowControl: { key: `pay-${k}`, parallelism: 1 } },
      );
      const after = await ctx.step.run("after", () => `after ${charged}`);
      return ctx.step.run("sum", () => ({ before, charged, after }));
    },
  });
  await host(t, { app: `stepfc-${k}`, workflows: [wf] });
  const res = await client.sendEvents([1, 2, 3].map((n) => ({ name: `stepfc.${k}`, data: { n } })));
  for (const [i, r] of res.entries()) {
    const run = await runEnded(runFor(r, wf).runId, { timeoutMs: 30000 });
    assert.equal(run.status, "succeeded", short(run));
    const sum = out(run, "sum");
    assert.equal(sum.charged, `charged ${i + 1}`);
    assert.equal(sum.after, `after charged ${i + 1}`, "the steps after the planned one replay in order");
    assert.equal(sum.before, null, "a step without its own config has no flow control");
  }
  assert.equal(gauge.max.get("charge"), 1, "one charge step at a time across the runs");
  assert.equal(free.max.get("before"), 3, "the other steps are not limited");
  assert.equal(gauge.total, 3, "each charge step ran once");
  for (const fc of seen) assert.deepEqual(fc, { key: `pay-${k}`, parallelism: 1 });
});

test("step.run with flowControl: a config without a limit is refused", { timeout: 30000 }, async (t) => {
  const k = tag();
  const wf = workflow({
    name: `stepfcbad.${k}`,
    triggers: [`stepfcbad.${k}`],
    retries: 0,
    handler: async (ctx) => {
      await ctx.step.run("ok", () => 1);
      await ctx.step.run("bad", () => 2, { flowControl: { key: `k-${k}` } });
    },
  });
  await host(t, { app: `stepfcbad-${k}`, workflows: [wf] });
  const run = await runEnded(runFor(await client.sendEvent({ name: `stepfcbad.${k}` }), wf).runId);
  assert.equal(run.status, "failed", short(run));
});
