// ctx.step.invoke between workflows: TypeScript → TypeScript (a sibling of the same
// serve()), TypeScript → Go (by URL), and Go → TypeScript (a Go native workflow invokes
// a TypeScript one by its URL). The Go workflows are served by cmd/duraton/sdkjs_test.go
// with the Go SDK, at $GO_WORKFLOWS.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow, runFor } from "../dist/index.js";
import { client, host, runEnded, runsOf, out, waitFor, tag, short } from "./lib.mjs";

const goBase = () => {
  const v = process.env.GO_WORKFLOWS;
  if (!v) throw new Error("GO_WORKFLOWS is not set: run through go test -run TestSDKJS");
  return v;
};

test("invoke: a TypeScript workflow invokes a sibling and a Go workflow", { timeout: 60000 }, async (t) => {
  const k = tag();
  const triple = workflow({
    name: `triple.${k}`,
    triggers: [`triple.${k}`],
    handler: async (ctx) => ctx.step.run("triple", () => ({ tripled: ctx.event.data.n * 3, invoked: ctx.event.name === "" })),
  });
  const parent = workflow({
    name: `parent.${k}`,
    triggers: [`parent.${k}`],
    handler: async (ctx) => {
      const n = ctx.event.data.n;
      const ts = await ctx.step.invoke("ts-child", { workflow: triple, body: { n } });
      const go = await ctx.step.invoke("go-child", { workflow: `${goBase()}/go/double`, body: { n } });
      return ctx.step.run("collect", () => ({ ts, go }));
    },
  });
  await host(t, { app: `invoke-${k}`, workflows: [triple, parent] });
  const r = runFor(await client.sendEvent({ name: `parent.${k}`, data: { n: 7 } }), parent);
  const run = await runEnded(r.runId, { timeoutMs: 30000 });
  assert.equal(run.status, "succeeded", short(run));
  assert.deepEqual(out(run, "collect"), {
    ts: { body: { tripled: 21, invoked: true }, isFailed: false, isCanceled: false },
    go: { body: { doubled: 14, lang: "go" }, isFailed: false, isCanceled: false },
  });
  assert.deepEqual(run.steps.filter((s) => s.type === "Invoke").map((s) => s.name), ["ts-child", "go-child"], short(run.steps));
});

test("invoke: a Go native workflow invokes a TypeScript workflow", { timeout: 60000 }, async (t) => {
  const k = tag();
  const seen = [];
  const square = workflow({
    name: `square.${k}`,
    triggers: [`square.${k}`],
    handler: async (ctx) => {
      seen.push(ctx.event.data);
      return ctx.step.run("square", () => ({ squared: ctx.event.data.n ** 2, lang: "ts" }));
    },
  });
  const { served } = await host(t, { app: `ts-${k}`, workflows: [square] });
  // The Go workflow is registered from TypeScript too (any URL can be a workflow's).
  await client.registerApp(`go-${k}`, [{ name: `go.parent.${k}`, url: `${goBase()}/go/parent`, triggers: [{ event: `go.start.${k}` }] }]);
  const r = runFor(await client.sendEvent({ name: `go.start.${k}`, data: { target: served.urlOf(square), n: 9 } }), `go.parent.${k}`);
  assert.ok(r && "runId" in r, short(r));
  const run = await runEnded(r.runId, { timeoutMs: 30000 });
  assert.equal(run.status, "succeeded", short(run));
  assert.deepEqual(out(run, "child-result"), { child: { squared: 81, lang: "ts" }, failed: false, event: `go.start.${k}` });
  assert.deepEqual(seen[0], { n: 9 }, "the TypeScript child sees the invoke body as ctx.event.data");
  assert.equal((await runsOf(`go.parent.${k}`, 1)).length, 1);
});

test("invoke: a workflow() that this serve() does not serve is refused (its URL is unknown)", { timeout: 60000 }, async (t) => {
  const k = tag();
  const elsewhere = workflow({ name: `elsewhere.${k}`, handler: async (ctx) => ctx.step.run("x", () => 1) });
  const failures = [];
  const parent = workflow({
    name: `lost.${k}`,
    retries: 0,
    handler: async (ctx) => ctx.step.invoke("child", { workflow: elsewhere, body: {} }),
    onFailure: (f) => {
      failures.push(f);
    },
  });
  await host(t, { app: `lost-${k}`, workflows: [parent] });
  const r = runFor(await client.sendEvent({ name: `lost.${k}` }), parent);
  assert.equal((await runEnded(r.runId)).status, "failed");
  await waitFor("the failure handler", () => failures.length === 1);
  assert.match(failures[0].error.body, /is not served by this serve\(\)/, failures[0].error.body);
});
