// Native workflows (docs/protocol.md, "Native workflows") run by the official
// @upstash/workflow serve(): the workflow is registered with PUT /apps/{app}, started by POST
// /events, sees the event in context.requestPayload ({id, name, data, ts, events}) and, with a
// batch, every event of the batch in receive order. Every delivery is verified by the SDK's
// own Receiver (serveEnv hands serve() both signing keys).

import { test } from "node:test";
import assert from "node:assert/strict";
import { Host, tag, short, api, waitFor, waitForRun, assertDeliveries, parseOut } from "./wflib.mjs";

const json = (v) => ({ headers: { "content-type": "application/json" }, body: JSON.stringify(v) });

async function putApp(app, workflows) {
  const r = await api("PUT", `/apps/${app}`, json({ workflows }));
  assert.equal(r.status, 200, `PUT /apps/${app}: ${short(r.text)}`);
  return r.json;
}

async function sendEvents(events) {
  const r = await api("POST", "/events", json(events));
  assert.equal(r.status, 200, `POST /events: ${short(r.text)}`);
  assert.ok(Array.isArray(r.json?.events), `POST /events answers {events: [...]}: ${short(r.text)}`);
  return r.json.events;
}

/** GET /runs/{id} until the native status is terminal; returns the run. */
async function nativeRun(runId, want) {
  let last;
  const run = await waitFor(
    `GET /runs/${runId} to be terminal`,
    async () => {
      const r = await api("GET", `/runs/${encodeURIComponent(runId)}`);
      if (r.status !== 200) throw new Error(`GET /runs/${runId}: HTTP ${r.status} ${short(r.text, 200)}`);
      last = r.json;
      return ["succeeded", "failed", "cancelled"].includes(last.status) ? last : undefined;
    },
    { timeoutMs: 20000, intervalMs: 100, describe: () => short(last) },
  );
  assert.equal(run.status, want, short(run));
  return run;
}

test("native: PUT /apps + POST /events start a serve() workflow with the event as requestPayload", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  const app = `compat-${k}`;
  const wf = `native.single.${k}`;
  const event = `order.placed.${k}`;
  const seen = [];
  const url = host.workflow("/native/single", async (ctx) => {
    seen.push(ctx.requestPayload);
    const total = await ctx.run("total", () => ctx.requestPayload.data.items.reduce((a, b) => a + b, 0));
    await ctx.run("done", () => ({ total, id: ctx.requestPayload.id }));
    return { total };
  });
  const reg = await putApp(app, [{ name: wf, url, triggers: [{ event }], retries: 0 }]);
  assert.ok(JSON.stringify(reg).includes(wf), `the stored definitions name the workflow: ${short(reg)}`);

  const data = { user: `u-${k}`, items: [1, 2, 3] };
  const [ev] = await sendEvents({ name: event, data });
  assert.match(ev.id, /^evt_/, short(ev));
  assert.equal(ev.runs.length, 1, short(ev));
  assert.equal(ev.runs[0].workflow, wf, short(ev));
  const runId = ev.runs[0].runId;
  assert.ok(runId, `the event started a run: ${short(ev)}`);

  const logged = await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/native/single" });
  assert.deepEqual(parseOut(logged.workflowRunResponse), { total: 6 }, "the route's return value is the run's response");
  const run = await nativeRun(runId, "succeeded");
  assert.equal(run.workflow, wf, short(run));
  assert.equal(run.app, app, short(run));
  assert.deepEqual(run.eventIds, [ev.id], short(run));

  const ds = assertDeliveries(host, "/native/single", runId);
  assert.ok(ds.length >= 3, `two steps and the end: ${host.describe("/native/single", runId)}`);
  for (const d of ds) {
    assert.equal(d.header("duraton-workflow"), wf, "Duraton-Workflow on every delivery");
    assert.equal(d.header("duraton-app"), app, "Duraton-App on every delivery");
  }
  assert.ok(seen.length >= 3, short(seen));
  for (const p of seen) {
    assert.equal(p.id, ev.id, `requestPayload.id: ${short(p)}`);
    assert.equal(p.name, event, `requestPayload.name: ${short(p)}`);
    assert.deepEqual(p.data, data, `requestPayload.data: ${short(p)}`);
    assert.equal(typeof p.ts, "number", `requestPayload.ts: ${short(p)}`);
    assert.deepEqual(p.events, [{ id: ev.id, name: event, data, ts: p.ts }], `requestPayload.events: ${short(p)}`);
  }
});

test("native: a batch workflow sees every event of the batch in receive order", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  const app = `compat-b-${k}`;
  const wf = `native.batch.${k}`;
  const event = `doc.updated.${k}`;
  const seen = [];
  const url = host.workflow("/native/batch", async (ctx) => {
    seen.push(ctx.requestPayload);
    await ctx.run("index", () => ctx.requestPayload.events.map((e) => e.data.n));
  });
  await putApp(app, [{ name: wf, url, triggers: [{ event }], retries: 0, batch: { maxSize: 4, timeoutMs: 60000 } }]);

  // Two requests (3 events, then 1): the batch fills by size, across requests.
  const first = await sendEvents([0, 1, 2].map((n) => ({ name: event, data: { n, k } })));
  const last = await sendEvents({ name: event, data: { n: 3, k } });
  const sent = [...first, ...last];
  for (const ev of sent) assert.deepEqual(ev.runs, [{ workflow: wf, batched: true }], `each event is batched: ${short(ev)}`);

  const list = await waitFor(`GET /runs?workflow=${wf} to list the batch's run`, async () => {
    const r = await api("GET", `/runs?workflow=${encodeURIComponent(wf)}`);
    if (r.status !== 200) throw new Error(`HTTP ${r.status} ${short(r.text, 200)}`);
    return r.json.runs?.length ? r.json.runs : undefined;
  });
  assert.equal(list.length, 1, `one run for one batch: ${short(list)}`);
  const runId = list[0].runId;
  await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/native/batch" });
  const run = await nativeRun(runId, "succeeded");
  assert.deepEqual(run.eventIds, sent.map((e) => e.id), `the run's events, in receive order: ${short(run)}`);
  assertDeliveries(host, "/native/batch", runId);

  assert.ok(seen.length >= 2, short(seen));
  for (const p of seen) {
    assert.deepEqual(
      p.events.map((e) => [e.id, e.name, e.data.n]),
      sent.map((e, n) => [e.id, event, n]),
      `requestPayload.events in receive order: ${short(p)}`,
    );
    assert.equal(p.id, sent[0].id, `the top level is the first event of the batch: ${short(p)}`);
    assert.deepEqual(p.data, { n: 0, k }, short(p));
  }
  const step = run.steps.find((s) => s.name === "index");
  assert.deepEqual(parseOut(step?.out), [0, 1, 2, 3], `the step saw the four events in order: ${short(run.steps)}`);
});
