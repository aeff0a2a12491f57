// serve(): one route per workflow under the base path, the Fetch handler and its Node
// and Express adapters, registration on start (idempotent), and the client's events.

import { test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { workflow, serve, Client, DuratonApiError, outcome, runFor } from "../dist/index.js";
import { client, env, host, runEnded, out, waitFor, tag, short } from "./lib.mjs";

const echo = (name, trigger) =>
  workflow({
    name,
    triggers: [trigger, { event: `${trigger}.alt` }],
    retries: 0,
    handler: async (ctx) => ctx.step.run("echo", () => ({ data: ctx.event.data, name: ctx.event.name, workflow: ctx.workflow, app: ctx.app })),
  });

test("serve: registers on start with the definitions, routes per workflow, 404 elsewhere; registerApp is idempotent", { timeout: 60000 }, async (t) => {
  const k = tag();
  const a = echo(`a.${k}`, `ev.${k}`);
  const b = workflow({
    name: `b.${k}`,
    triggers: [`ev.${k}`],
    retries: 2,
    rateLimit: { limit: 5, perMs: 1_000, key: "user.id" },
    idempotency: { key: "user.id" },
    handler: async (ctx) => ctx.step.run("b", () => ctx.events.length),
  });
  const { served, base } = await host(t, { app: `serve-${k}`, workflows: [a, b], registerOnStart: true });
  const app = await served.ready;
  assert.deepEqual(
    app.workflows.map((w) => [w.name, w.url, w.triggers.map((x) => x.event), w.retries]).sort(),
    [
      [a.name, `${base}/api/serve-${k}/${a.name}`, [`ev.${k}`, `ev.${k}.alt`], 0],
      [b.name, `${base}/api/serve-${k}/${b.name}`, [`ev.${k}`], 2],
    ],
  );
  const stored = app.workflows.find((w) => w.name === b.name).flowControl;
  assert.deepEqual(stored.rateLimit, { limit: 5, perMs: 1000, key: "user.id" }, short(stored));
  assert.equal(stored.idempotency.key, "user.id", short(stored));
  const again = await served.registerApp();
  assert.deepEqual(again.workflows.map((w) => w.name).sort(), [a.name, b.name].sort(), "registering again changes nothing");

  // One event, two workflows: typed outcomes per workflow.
  const [res] = await client.sendEvents([{ name: `ev.${k}`, data: { user: { id: "u1" } } }]);
  assert.equal(res.runs.length, 2, short(res));
  const ra = runFor(res, a), rb = runFor(res, b);
  assert.equal(outcome(ra), "started");
  assert.equal(outcome(rb), "started");
  const ended = await runEnded(ra.runId);
  assert.deepEqual(out(ended, "echo"), { data: { user: { id: "u1" } }, name: `ev.${k}`, workflow: a.name, app: `serve-${k}` });
  assert.equal((await runEnded(rb.runId)).status, "succeeded");
  // The second trigger of a; b's idempotency dedupes u1 (a has no such control).
  const [alt, dup] = await client.sendEvents([
    { name: `ev.${k}.alt`, data: { n: 1 } },
    { name: `ev.${k}`, data: { user: { id: "u1" } } },
  ]);
  assert.deepEqual(alt.runs.map((r) => r.workflow), [a.name]);
  assert.deepEqual(runFor(dup, b), { workflow: b.name, deduped: true });

  // Event-level dedupeId: the repeat answers the first id and fans out to nothing.
  const first = await client.sendEvent({ name: `ev.${k}.alt`, data: {}, dedupeId: `d-${k}` });
  const repeat = await client.sendEvent({ name: `ev.${k}.alt`, data: {}, dedupeId: `d-${k}` });
  assert.deepEqual(repeat, { id: first.id, deduped: true, runs: [] });

  const r404 = await fetch(`${base}/api/serve-${k}/nope`, { method: "POST", body: "{}" });
  assert.equal(r404.status, 404);
  assert.match((await r404.json()).error, /no workflow/);
  const unsigned = await fetch(served.urlOf(a), { method: "POST", body: "{}" });
  assert.notEqual(unsigned.status, 200, "an unsigned request is refused (deliveries are verified)");
});

test("serve: a bad definition is the server's 400 naming the workflow and field", { timeout: 30000 }, async () => {
  const k = tag();
  const bad = workflow({ name: `bad.${k}`, batch: { maxSize: 1, timeoutMs: 1000 }, handler: async () => {} });
  const s = serve({ app: `bad-${k}`, workflows: [bad], baseUrl: "http://127.0.0.1:9/api", env, registerOnStart: false });
  await assert.rejects(s.registerApp(), (e) => e instanceof DuratonApiError && e.status === 400 && e.message.includes(bad.name) && e.message.includes("maxSize"));
  const errors = [];
  const onStart = serve({ app: `bad-${k}`, workflows: [bad], baseUrl: "http://127.0.0.1:9/api", env, onRegisterError: (e) => errors.push(e) });
  await assert.rejects(onStart.ready, DuratonApiError);
  await waitFor("the start-up registration error to be reported", () => errors.length === 1);
  assert.throws(() => workflow({ name: "has space", handler: async () => {} }), /workflow name/);
  assert.throws(() => serve({ app: "x", workflows: [bad, bad], baseUrl: "http://127.0.0.1:9/api", env, registerOnStart: false }), /two workflows/);
  assert.throws(() => new Client({ env: {} }), /DURATON_URL/);
});

test("serve: the Express adapter runs a workflow mounted under a path", { timeout: 60000 }, async (t) => {
  const k = tag();
  const wf = echo(`x.${k}`, `xev.${k}`);
  const { served } = await host(t, {
    app: `express-${k}`,
    workflows: [wf],
    mount: (s) => {
      const app = express();
      app.use(`/api/express-${k}`, s.express());
      app.use(express.json()); // after the workflow routes: they need the raw body
      app.post(`/api/express-${k}/other`, (req, res) => res.json({ other: req.body }));
      return app;
    },
  });
  const r = runFor(await client.sendEvent({ name: `xev.${k}`, data: { via: "express" } }), wf);
  const run = await runEnded(r.runId);
  assert.equal(run.status, "succeeded", short(run));
  assert.deepEqual(out(run, "echo").data, { via: "express" });
  assert.ok(served.urlOf(wf).endsWith(`/api/express-${k}/x.${k}`));
  const other = await fetch(served.urlOf(wf).replace(/[^/]+$/, "other"), { method: "POST", headers: { "content-type": "application/json" }, body: '{"a":1}' });
  assert.deepEqual(await other.json(), { other: { a: 1 } }, "a path that is no workflow goes on to the rest of the Express app");
});

test("serve: the Fetch handler answers a Request directly", { timeout: 30000 }, async () => {
  const k = tag();
  const wf = echo(`f.${k}`, `fev.${k}`);
  const s = serve({ app: `fetch-${k}`, workflows: [wf], baseUrl: "https://example.test/base/", env, registerOnStart: false });
  assert.equal(s.urlOf(wf), `https://example.test/base/f.${k}`);
  assert.equal((await s(new Request("https://example.test/base/other", { method: "POST" }))).status, 404, "serve() returns the Fetch handler itself");
  assert.equal((await s.fetch(new Request("https://example.test/base/other", { method: "POST" }))).status, 404);
  assert.equal((await s.fetch(new Request(`https://example.test/base/f.${k}`, { method: "GET" }))).status, 405);
  const res = await s.fetch(new Request(`https://example.test/base/f.${k}`, { method: "POST", body: "{}" }));
  assert.ok(res.status >= 400, `an unsigned delivery is refused by @upstash/workflow's receiver (${res.status})`);
});
