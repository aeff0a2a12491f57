// flow-control doc, "Throttle": throttle: { limit: 100, perMs: 60_000, key: "customer" }.
// GCRA with burst = limit: 100 starts at once from idle, then one every 600 ms; no run is lost.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow } from "../dist/index.js";
import { client, host, runEnded, tag, short } from "./lib.mjs";

test("throttle: 100 starts per minute per customer, the overflow delayed (not dropped)", { timeout: 60000 }, async (t) => {
  const k = tag();
  const started = new Map(); // customer:i -> first delivery time
  const wf = workflow({
    name: `throttle.${k}`,
    triggers: [`order.${k}`],
    throttle: { limit: 100, perMs: 60_000, key: "customer" },
    handler: async (ctx) => {
      const { customer, i } = ctx.event.data;
      if (!started.has(`${customer}:${i}`)) started.set(`${customer}:${i}`, Date.now());
      return ctx.step.run("done", () => i);
    },
  });
  await host(t, { app: `throttle-${k}`, workflows: [wf] });

  const sentAt = Date.now();
  const burst = await client.sendEvents(Array.from({ length: 102 }, (_, i) => ({ name: `order.${k}`, data: { customer: "c1", i } })));
  const other = await client.sendEvent({ name: `order.${k}`, data: { customer: "c2", i: 0 } });
  const ids = [...burst, other].map((r) => {
    assert.ok("runId" in r.runs[0], `a throttled event still creates a run: ${short(r)}`);
    return r.runs[0].runId;
  });
  // Right after the events (unless it has started already, under load): c1's 102nd waits
  // for its start in the throttle; c2 is never held by it.
  const [r101, c2] = await Promise.all([ids[101], ids[102]].map((id) => client.getRun(id)));
  if (!r101.startedAt) assert.match(r101.waiting?.reason ?? "", /^throttled/, `c1 past its burst waits for its start: ${short(r101)}`);
  assert.doesNotMatch(c2.waiting?.reason ?? "", /throttled/, `c2 is not held by c1's throttle: ${short(c2)}`);
  for (const id of ids) assert.equal((await runEnded(id, { timeoutMs: 30000 })).status, "succeeded");

  // A start can be late under load, never early: the 101st no sooner than perMs/limit =
  // 600 ms after the burst, the 102nd no sooner than 1200 ms.
  const at = (c, i) => started.get(`${c}:${i}`) - sentAt;
  assert.ok(at("c1", 100) >= 590, `the 101st start waits 600 ms (it waited ${at("c1", 100)} ms)`);
  assert.ok(at("c1", 101) >= 1190, `the 102nd waits 1200 ms (it waited ${at("c1", 101)} ms)`);
  assert.equal(started.size, 103, "no run lost");
});
