// flow-control doc, "Batch": the index.documents example as written. A run per 100
// events or 5 s after the first, per index; the run sees ctx.events in receive order.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow, runFor } from "../dist/index.js";
import { client, host, runsOf, runEnded, tag, short } from "./lib.mjs";

test("batch: index.documents folds 100 events into one run with ctx.events; a smaller batch flushes at 5 s", { timeout: 60000 }, async (t) => {
  const indexed = [];
  const index = async (data) => {
    indexed.push(data);
    return { indexed: data.id };
  };

  const indexDocuments = workflow({
    name: "index.documents",
    batch: { maxSize: 100, timeoutMs: 5_000, key: "index" },
    handler: async (ctx) => {
      for (const e of ctx.events ?? []) {
        await ctx.step.run(e.data.id, () => index(e.data));
      }
    },
  });

  await host(t, { app: "docs", workflows: [indexDocuments] });
  const k = tag();
  const main = Array.from({ length: 100 }, (_, i) => ({ name: "index.documents", data: { id: `m-${k}-${i}`, index: "main" } }));
  const other = Array.from({ length: 3 }, (_, i) => ({ name: "index.documents", data: { id: `o-${k}-${i}`, index: "other" } }));
  const sentAt = Date.now();
  const results = await client.sendEvents([...main.slice(0, 50), ...other, ...main.slice(50)]);
  for (const r of results) assert.deepEqual(runFor(r, indexDocuments), { workflow: "index.documents", batched: true }, short(r));
  // The 100 flushed at once; the other index's 3 wait in the buffer (GET /flow-state).
  const fs = await client.flowState({ workflow: "index.documents" });
  assert.deepEqual(fs.batch.map((b) => [b.app, b.workflow, b.buffered]), [["docs", "index.documents", 3]], short(fs));
  const [registered] = await client.listWorkflows({ app: "docs" });
  assert.deepEqual(registered.flowControl.batch, { maxSize: 100, timeoutMs: 5_000, key: "index" }, short(registered));

  const runs = await runsOf("index.documents", 2, { timeoutMs: 20000 });
  assert.equal(runs.length, 2, `one run per index: ${short(runs)}`);
  const ended = await Promise.all(runs.map((r) => runEnded(r.runId, { timeoutMs: 30000 })));
  const ids = (ev) => results.filter((_, i) => ev(i)).map((r) => r.id);
  const mainRun = ended.find((r) => r.eventIds.length === 100);
  const otherRun = ended.find((r) => r.eventIds.length === 3);
  assert.ok(mainRun && otherRun, short(ended.map((r) => r.eventIds.length)));
  assert.deepEqual(mainRun.eventIds, ids((i) => i < 50 || i >= 53), "the main batch: its 100 events in receive order");
  assert.deepEqual(otherRun.eventIds, ids((i) => i >= 50 && i < 53), "the other index batches separately");
  assert.equal(mainRun.status, "succeeded");
  assert.deepEqual(mainRun.steps.filter((s) => s.type === "Run").map((s) => s.name), main.map((e) => e.data.id), "one step per event, in order");
  assert.ok(otherRun.createdAt - sentAt >= 4500, `the 3-event batch flushed at its 5 s timeout (${otherRun.createdAt - sentAt} ms)`);
  assert.equal(indexed.length, 103, "each event indexed once");
});
