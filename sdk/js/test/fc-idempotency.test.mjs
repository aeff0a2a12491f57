// flow-control doc, "Idempotency": idempotency: { key: "orderId", periodMs: 86_400_000 }.
// As the doc says to verify it: two distinct payloads start two runs; a repeat is deduped.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow, runFor, outcome } from "../dist/index.js";
import { client, host, runEnded, waitFor, tag, short } from "./lib.mjs";

test("idempotency: at most one run per orderId per 24h; the duplicate still wakes waiters", { timeout: 60000 }, async (t) => {
  const k = tag();
  const charge = workflow({
    name: `charge.${k}`,
    triggers: [`order.paid.${k}`],
    idempotency: { key: "orderId", periodMs: 86_400_000 }, // at most one run per orderId per 24h
    handler: async (ctx) => ctx.step.run("charge", () => ctx.event.data.orderId),
  });
  const waiter = workflow({
    name: `waiter.${k}`,
    triggers: [`wait.${k}`],
    handler: async (ctx) => {
      const got = await ctx.step.waitForEvent("paid", `order.paid.${k}`, { timeout: "1m" });
      return ctx.step.run("saw", () => got.data);
    },
  });
  await host(t, { app: `idem-${k}`, workflows: [charge, waiter] });

  const [o1, o2] = await client.sendEvents([
    { name: `order.paid.${k}`, data: { orderId: "o-1" } },
    { name: `order.paid.${k}`, data: { orderId: "o-2" } },
  ]);
  assert.equal(outcome(runFor(o1, charge)), "started", short(o1));
  assert.equal(outcome(runFor(o2, charge)), "started", "a distinct orderId starts its own run");

  const w = runFor(await client.sendEvent({ name: `wait.${k}` }), waiter);
  await runEnded(runFor(o1, charge).runId);
  await waitFor("the waiter to wait", async () => (await client.getRun(w.runId)).status === "waiting");
  const dup = await client.sendEvent({ name: `order.paid.${k}`, data: { orderId: "o-1", retry: true } });
  assert.deepEqual(runFor(dup, charge), { workflow: charge.name, deduped: true }, "the repeat is deduped, with no run id");
  const woken = await runEnded(w.runId);
  assert.deepEqual(woken.steps.find((s) => s.name === "saw").out, { orderId: "o-1", retry: true }, "the deduped event still woke the waiter");
});
