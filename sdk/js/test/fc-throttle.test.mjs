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

  // c1: a burst of 100, then 20 more, the last due 20 × 600 ms = 12 s later (long enough
  // that c2's start, which waits for no one, comes first even on a loaded machine).
  const sentAt = Date.now();
  const burst = await client.sendEvents(Array.from({ length: 120 }, (_, i) => ({ name: `order.${k}`, data: { customer: "c1", i } })));
  // c2 has its own rate: it does not queue behind c1's overflow.
  const other = await client.sendEvent({ name: `order.${k}`, data: { customer: "c2", i: 0 } });
  const ids = [...burst, other].map((r) => {
    assert.ok("runId" in r.runs[0], `a throttled event still creates a run: ${short(r)}`);
    return r.runs[0].runId;
  });
  for (const id of ids) assert.equal((await runEnded(id, { timeoutMs: 30000 })).status, "succeeded");
  assert.equal(started.size, 121, "no run lost");

  // A start can be late under load, never early: c1's 100 + n-th no sooner than n × 600 ms.
  const at = (c, i) => started.get(`${c}:${i}`) - sentAt;
  for (const n of [1, 5, 10, 20]) {
    assert.ok(at("c1", 99 + n) >= n * 600 - 10, `c1's start ${100 + n} waits ${n * 600} ms (it waited ${at("c1", 99 + n)} ms)`);
  }
  assert.ok(at("c2", 0) < at("c1", 119), `c2 starts before c1's overflow is through (c2 at ${at("c2", 0)} ms, c1's last at ${at("c1", 119)} ms)`);
});
