// flow-control doc, "Rate limit": rateLimit: { limit: 1000, perMs: 60_000, key: "ip" }.
// Up to 1000 starts at once from idle, then one every 60 ms (GCRA); the rest are shed
// and reported dropped: true.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow, outcome, runFor, Client } from "../dist/index.js";
import { floodEnv, host, runsOf, waitFor, tag } from "./lib.mjs";

test("rateLimit: past 1000 per minute an ip's events are dropped; another ip is not", { timeout: 60000 }, async (t) => {
  // A process of its own: its ~1,000 runs would hold other files' runs at the project
  // ceiling of a shared one.
  const env = floodEnv();
  const client = new Client({ env });
  const k = tag();
  let deliveries = 0;
  const wf = workflow({
    name: `ratelimit.${k}`,
    triggers: [`hit.${k}`],
    rateLimit: { limit: 1000, perMs: 60_000, key: "ip" },
    handler: async (ctx) => {
      await ctx.step.run("hit", () => {
        deliveries++;
      });
    },
  });
  await host(t, { app: `ratelimit-${k}`, workflows: [wf], env });

  const count = (results) => {
    const c = {};
    for (const r of results) c[outcome(runFor(r, wf))] = (c[outcome(runFor(r, wf))] ?? 0) + 1;
    return c;
  };
  const hits = (ip, n) => Array.from({ length: n }, (_, i) => ({ name: `hit.${k}`, data: { ip, i } }));
  const t0 = Date.now();
  const first = await client.sendEvents(hits("10.0.0.1", 1000));
  const second = await client.sendEvents([...hits("10.0.0.1", 999), ...hits("10.0.0.2", 1)]);
  const elapsed = Date.now() - t0;
  assert.deepEqual(count(first), { started: 1000 }, "the first 1000 start runs (the burst)");
  const again = count(second.slice(0, 999));
  // Within `elapsed` ms the bucket refilled at most elapsed/60 starts.
  const refill = Math.floor(elapsed / 60) + 1;
  assert.ok((again.started ?? 0) <= refill, `at most ${refill} more starts after ${elapsed} ms: ${JSON.stringify(again)}`);
  assert.ok(again.dropped >= 999 - refill, `the rest dropped: ${JSON.stringify(again)}`);
  for (const r of second.slice(0, 999)) {
    const run = runFor(r, wf);
    if (outcome(run) === "dropped") assert.deepEqual(run, { workflow: wf.name, dropped: true }, "dropped, with no run id");
  }
  assert.equal(outcome(runFor(second[999], wf)), "started", "another ip has its own limit");
  const want = 1001 + (again.started ?? 0);
  const runs = await runsOf(wf.name, want, { c: client, status: "succeeded", timeoutMs: 40000 });
  assert.equal(runs.length, want, "every admitted event ran, and no run for the dropped ones");
  await waitFor("every run's delivery", () => deliveries === want);
});
