// flow-control doc, "Priority": priority: { shiftMs: 60_000 }. Against a process whose
// project ceiling is 1, the shifted workflow's run goes ahead of an older unshifted one.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow, Client } from "../dist/index.js";
import { host, ceilingEnv, runEnded, waitFor, tag } from "./lib.mjs";

test("priority: at a full project ceiling, the shifted workflow's run jumps the queue", { timeout: 60000 }, async (t) => {
  const env = ceilingEnv();
  const c = new Client({ env });
  const k = tag();
  const order = [];
  let release;
  const held = new Promise((r) => (release = r));
  const report = workflow({
    name: `report.${k}`,
    triggers: [`report.${k}`],
    handler: async (ctx) => {
      await ctx.step.run("work", async () => {
        order.push(`report:${ctx.event.data.n}`);
        if (ctx.event.data.n === 1) await held;
      });
    },
  });
  const alert = workflow({
    name: `alert.${k}`,
    triggers: [`alert.${k}`],
    priority: { shiftMs: 60_000 },
    handler: async (ctx) => {
      await ctx.step.run("work", async () => order.push("alert"));
    },
  });
  await host(t, { app: `prio-${k}`, workflows: [report, alert], env });

  const r1 = (await c.sendEvent({ name: `report.${k}`, data: { n: 1 } })).runs[0].runId;
  await waitFor("report 1 to hold the only slot", () => order.length === 1);
  const r2 = (await c.sendEvent({ name: `report.${k}`, data: { n: 2 } })).runs[0].runId;
  const a = (await c.sendEvent({ name: `alert.${k}`, data: {} })).runs[0].runId;
  await waitFor("both to queue at the ceiling", async () => (await c.getRun(r2)).status === "queued" && (await c.getRun(a)).status === "queued");
  release();
  for (const id of [r1, r2, a]) assert.equal((await runEnded(id, { c })).status, "succeeded");
  assert.deepEqual(order, ["report:1", "alert", "report:2"], "the shifted run went ahead of the older one");
});
