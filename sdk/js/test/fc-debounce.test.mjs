// flow-control doc, "Debounce": debounce: { periodMs: 5_000, key: "documentId" }.
// A burst collapses into one run 5 s after its last event, carrying the last event.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow, runFor } from "../dist/index.js";
import { client, host, runsOf, runEnded, sleep, tag, short } from "./lib.mjs";

test("debounce: a burst per documentId becomes one run with the last event, 5 s after the burst", { timeout: 60000 }, async (t) => {
  const k = tag();
  const wf = workflow({
    name: `debounce.${k}`,
    triggers: [`doc.edited.${k}`],
    debounce: { periodMs: 5_000, key: "documentId" },
    handler: async (ctx) => {
      return ctx.step.run("save", () => ({ documentId: ctx.event.data.documentId, rev: ctx.event.data.rev, events: ctx.events.length, ts: ctx.event.ts }));
    },
  });
  await host(t, { app: `debounce-${k}`, workflows: [wf] });

  const sent = [];
  for (const rev of [1, 2, 3]) {
    sent.push(await client.sendEvent({ name: `doc.edited.${k}`, data: { documentId: "d1", rev } }));
    await sleep(300);
  }
  sent.push(await client.sendEvent({ name: `doc.edited.${k}`, data: { documentId: "d2", rev: 1 } }));
  for (const r of sent) assert.deepEqual(runFor(r, wf), { workflow: wf.name, debounced: true }, short(r));

  const runs = await runsOf(wf.name, 2, { timeoutMs: 20000 });
  const ended = await Promise.all(runs.map((r) => runEnded(r.runId)));
  const byDoc = Object.fromEntries(ended.map((r) => [r.steps.find((s) => s.name === "save") && r.steps.find((s) => s.name === "save").out.documentId, r]));
  const d1 = byDoc.d1;
  assert.ok(d1, short(ended));
  const saved = d1.steps.find((s) => s.name === "save").out;
  assert.deepEqual({ ...saved, ts: undefined }, { documentId: "d1", rev: 3, events: 1, ts: undefined }, "one run, the last event of the burst");
  assert.deepEqual(d1.eventIds, [sent[2].id], short(d1));
  // Both times are the server's: the last event's receive time and the run's creation.
  assert.ok(d1.createdAt - saved.ts >= 5000, `the run fires after 5 s of quiet (${d1.createdAt - saved.ts} ms after the last d1 event)`);
  assert.ok(byDoc.d2, "d2 debounces independently");
  await sleep(500);
  assert.equal((await runsOf(wf.name, 2)).length, 2, "no other run");
});
