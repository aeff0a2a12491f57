// ctx.step.*: sleep, sleepUntil, call, waitForEvent (with its timeout), and onFailure
// with a WorkflowFailure for a run that fails for another reason than its budget.

import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { workflow, runFor, WorkflowFailure, isBudgetError } from "../dist/index.js";
import { client, host, runEnded, out, waitFor, tag, short } from "./lib.mjs";

test("steps: sleep, sleepUntil, call and a timed-out waitForEvent", { timeout: 60000 }, async (t) => {
  const k = tag();
  const third = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      res.writeHead(201, { "content-type": "application/json" });
      res.end(JSON.stringify({ got: JSON.parse(body || "null"), method: req.method }));
    });
  });
  await new Promise((r) => third.listen(0, "127.0.0.1", r));
  t.after(() => new Promise((r) => third.close(r)));
  const wf = workflow({
    name: `steps.${k}`,
    triggers: [`steps.${k}`],
    handler: async (ctx) => {
      const t0 = await ctx.step.run("t0", () => Date.now());
      await ctx.step.sleep("nap", 1);
      const t1 = await ctx.step.run("t1", () => Date.now());
      // @upstash/workflow keeps whole seconds: wake at a whole second.
      const target = Math.ceil((t1 + 1000) / 1000) * 1000;
      await ctx.step.sleepUntil("until", new Date(target));
      const t2 = await ctx.step.run("t2", () => Date.now());
      const called = await ctx.step.call("post", { url: `http://127.0.0.1:${third.address().port}/x`, method: "POST", body: { a: 1 } });
      const waited = await ctx.step.waitForEvent("never", `never.${k}`, { timeout: 1 });
      return ctx.step.run("sum", () => ({ slept: t1 - t0, until: t2 - target, status: called.status, body: called.body, waited }));
    },
  });
  await host(t, { app: `steps-${k}`, workflows: [wf] });
  const r = runFor(await client.sendEvent({ name: `steps.${k}` }), wf);
  const run = await runEnded(r.runId, { timeoutMs: 30000 });
  assert.equal(run.status, "succeeded", short(run));
  const sum = out(run, "sum");
  assert.ok(sum.slept >= 1000, `sleep 1 s (${sum.slept} ms)`);
  assert.ok(sum.until >= 0, `sleepUntil: not before the time (${sum.until} ms after it)`);
  assert.equal(sum.status, 201);
  assert.deepEqual(sum.body, { got: { a: 1 }, method: "POST" }, "Duraton made the call");
  assert.deepEqual(sum.waited, { timeout: true }, "the wait timed out");
});

test("onFailure: a run that throws non-retryably calls the failure handler with a WorkflowFailure", { timeout: 60000 }, async (t) => {
  const k = tag();
  const failures = [];
  const wf = workflow({
    name: `fails.${k}`,
    triggers: [`fails.${k}`],
    retries: 0,
    handler: async (ctx) => {
      await ctx.step.run("boom", () => {
        throw new Error(`boom ${ctx.event.data.n}`);
      });
    },
    onFailure: async (f) => {
      failures.push(f);
    },
  });
  await host(t, { app: `fails-${k}`, workflows: [wf] });
  const r = runFor(await client.sendEvent({ name: `fails.${k}`, data: { n: 5 } }), wf);
  const run = await runEnded(r.runId);
  assert.equal(run.status, "failed", short(run));
  await waitFor("the failure handler", () => failures.length === 1);
  const f = failures[0];
  assert.equal(f.runId, r.runId);
  assert.equal(f.workflow, wf.name);
  assert.deepEqual(f.event.data, { n: 5 });
  assert.ok(f.error instanceof WorkflowFailure, short(f.error));
  assert.equal(isBudgetError(f.error), false);
  assert.match(f.error.body, /boom 5/);
});
