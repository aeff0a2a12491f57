// What Upstash's own @upstash/workflow tests check against QStash about runs and their logs
// (workflow-js examples/ci invoke, same-run-id and middleware-logs, and the live logs tests of
// src/client), checked against duraton.
// docs/compatibility.md maps every Upstash test to the test here (or elsewhere in this suite)
// that checks the same thing. The tests run concurrently, each on its own host, paths and run
// ids; like Upstash's, they count every request their endpoint gets.

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { WorkflowMiddleware } from "@upstash/workflow";
import { Host, newWfClient, api, tag, short, waitFor, waitForRun } from "./wflib.mjs";

const client = newWfClient();

describe("Upstash's workflow CI and integration routes: invoke, run ids, middleware, logs", { concurrency: true }, () => {
  test("invoke with a workflowRunId and a label; call with a workflow starts a run and answers its id; two invokes in parallel", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    const mount = (id, fn) => {
      host.workflow(`/invoke/${id}`, fn);
      return { routeFunction: fn, options: {}, workflowId: id };
    };
    const childId = `child-${tag()}`;
    let child;
    const branchOne = mount("branchOne", async (ctx) => {
      await ctx.run("one", () => "x");
      return { "branch-one": "result" };
    });
    const branchTwo = mount("branchTwo", async (ctx) => {
      await ctx.sleep("wait", 1);
      return "branch-two-result";
    });
    const second = mount("second", async (ctx) => {
      child = { payload: ctx.requestPayload, header: ctx.headers.get("invoke-header"), runId: ctx.workflowRunId, label: ctx.label };
      const both = await Promise.all([
        ctx.invoke("invoke branch one", { workflow: branchOne, body: 1 }),
        ctx.invoke("invoke branch two", { workflow: branchTwo, body: 2 }),
      ]);
      return both.map((r) => r.body);
    });
    let asyncRan = 0;
    const fourth = mount("fourth", async (ctx) => {
      await ctx.run("mock", () => asyncRan++);
    });
    let parent;
    const url = host.workflow("/invoke/first", async (ctx) => {
      const invoked = await ctx.invoke("invoking other", {
        workflow: second,
        body: "invoke-payload",
        headers: { "invoke-header": "invoke-header-value" },
        workflowRunId: childId,
        label: "invoke-label",
      });
      const started = await ctx.call("call workflow", { workflow: fourth, body: "invoke-payload", retries: 0 });
      parent = await ctx.run("keep", () => ({ invoked, started: { status: started.status, runId: started.body?.workflowRunId } }));
    });
    const { workflowRunId: runId } = await client.trigger({ url, body: 123 });
    await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/invoke/first", timeoutMs: 40000, extra: () => host.describe("/invoke/second") });
    assert.deepEqual(child, { payload: "invoke-payload", header: "invoke-header-value", runId: `wfr_${childId}`, label: "invoke-label" });
    assert.deepEqual(parent.invoked, { body: [{ "branch-one": "result" }, "branch-two-result"], isFailed: false, isCanceled: false });
    assert.equal(parent.started.status, 200, short(parent.started));
    assert.equal(typeof parent.started.runId, "string", short(parent.started));
    await waitForRun(parent.started.runId, { want: "RUN_SUCCESS" });
    assert.ok(asyncRan >= 1, "the run started by call with a workflow ran");
  });

  test("the same workflowRunId triggered again after the run ended runs again and is logged as a new run", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    const id = `same-run-id-${tag()}`;
    let runs = 0;
    const url = host.workflow("/same-run-id", async (ctx) => {
      const [one, two] = await Promise.all([ctx.run("parallel run one", () => "one"), ctx.run("parallel run two", () => "two")]);
      await ctx.sleep("sleep", 1);
      await ctx.run("last", () => {
        runs++;
        return `${one}:${two}`;
      });
    });
    const first = await client.trigger({ url, workflowRunId: id, body: { input: "x" }, retries: 0 });
    const run1 = await waitForRun(first.workflowRunId, { want: "RUN_SUCCESS", host, path: "/same-run-id" });
    const second = await client.trigger({ url, workflowRunId: id, body: { input: "x" }, retries: 0 });
    assert.equal(second.workflowRunId, first.workflowRunId);
    const run2 = await waitFor("a second run under the same id", async () => {
      const r = await api("GET", `/v2/workflows/logs?workflowRunId=${encodeURIComponent(first.workflowRunId)}`);
      return (r.json?.runs ?? []).find((x) => x.workflowRunCreatedAt > run1.workflowRunCreatedAt && x.workflowState === "RUN_SUCCESS");
    }, { describe: () => host.describe("/same-run-id") });
    const names = run2.steps.flatMap((g) => g.steps.map((s) => s.stepName)).filter((n) => n !== "init").sort();
    assert.deepEqual(names, ["last", "parallel run one", "parallel run two", "sleep"]);
    assert.equal(runs, 2, "the route's last step ran once per run");
  });

  test("middleware callbacks of invoked runs: not a first invocation, one submit per step, deleted at the end", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    const logs = new Map(); // run id → log lines
    const push = (runId, line) => {
      if (!runId) return;
      if (!logs.has(runId)) logs.set(runId, []);
      logs.get(runId).push(line);
    };
    const middleware = new WorkflowMiddleware({
      name: "record",
      callbacks: {
        runStarted: ({ context }) => push(context.workflowRunId, "runStarted"),
        runCompleted: ({ context, result }) => push(context.workflowRunId, `runCompleted:${JSON.stringify(result)}`),
        beforeExecution: ({ context, stepName }) => push(context.workflowRunId, `beforeExecution:${stepName}`),
        afterExecution: ({ context, stepName }) => push(context.workflowRunId, `afterExecution:${stepName}`),
        onError: ({ workflowRunId, error }) => push(workflowRunId, `onError:${error.message}`),
        onWarning: ({ workflowRunId, warning }) => push(workflowRunId, `onWarning:${warning}`),
        onInfo: ({ workflowRunId, info }) => push(workflowRunId, `onInfo:${info}`),
      },
    });
    const third = await Host.start(t);
    const called = third.plain("/called", () => ({ status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify({ message: "middleware-logs-endpoint-result" }) }));
    const mount = (id, fn) => {
      host.workflow(`/mw/${id}`, fn, { middlewares: [middleware] });
      return { routeFunction: fn, options: { middlewares: [middleware] }, workflowId: id };
    };
    const runAndSleep = mount("runAndSleep", async (ctx) => {
      await ctx.run("run step", () => "run-result");
      await ctx.sleep("sleep step", 1);
      return { result: "runAndSleep-complete", workflowRunId: ctx.workflowRunId };
    });
    const callWf = mount("call", async (ctx) => {
      const { status, body } = await ctx.call("call step", { url: called, method: "GET" });
      return { result: `call-${status}-${body.message}`, workflowRunId: ctx.workflowRunId };
    });
    const waitWf = mount("wait", async (ctx) => {
      const { timeout } = await ctx.waitForEvent("wait for event", `never-${tag()}`, { timeout: 1 });
      return { result: `wait-${timeout}`, workflowRunId: ctx.workflowRunId };
    });
    let results;
    const url = host.workflow("/mw/main", async (ctx) => {
      const a = await ctx.invoke("invoke runAndSleep", { workflow: runAndSleep, body: "test" });
      const b = await ctx.invoke("invoke call", { workflow: callWf, body: "test" });
      const c = await ctx.invoke("invoke waitForEvent", { workflow: waitWf, body: "test" });
      results = [a.body, b.body, c.body];
    }, { middlewares: [middleware] });
    const { workflowRunId: runId } = await client.trigger({ url, body: "middleware-test-payload", retries: 0 });
    await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/mw/main", timeoutMs: 40000 });
    assert.deepEqual(results.map((r) => r.result), ["runAndSleep-complete", "call-200-middleware-logs-endpoint-result", "wait-true"]);

    const first = "onInfo:Run id identified. isFirstInvocation: false, unknownSdk: false";
    const done = "onInfo:Workflow endpoint execution completed successfully.";
    const ending = (id, result) => [`runCompleted:${JSON.stringify(result)}`, `onInfo:Deleting workflow run ${id} from QStash.`, `onInfo:Workflow run ${id} deleted from QStash successfully.`, done];
    const submitted = (name) => new RegExp(`^onInfo:Submitted step "${name}" with messageId: \\S+\\.$`);
    const expected = {
      [results[0].workflowRunId]: [first, "runStarted", "beforeExecution:run step", submitted("run step"), done, first, "afterExecution:run step", "beforeExecution:sleep step", submitted("sleep step"), done, first, "afterExecution:sleep step", ...ending(results[0].workflowRunId, results[0])],
      [results[1].workflowRunId]: [first, "runStarted", "beforeExecution:call step", submitted("call step"), done, first, "afterExecution:call step", ...ending(results[1].workflowRunId, results[1])],
      [results[2].workflowRunId]: [first, "runStarted", "beforeExecution:wait for event", done, first, "afterExecution:wait for event", ...ending(results[2].workflowRunId, results[2])],
    };
    for (const [id, want] of Object.entries(expected)) {
      await waitFor(`the last log line of ${id}`, () => (logs.get(id) ?? []).length >= want.length, { describe: () => short(logs.get(id), 2000) });
      const got = [...logs.get(id)];
      assert.equal(got.length, want.length, `${id}: ${short(got, 3000)}`);
      // The end of one request and the start of the next may interleave: compare as multisets.
      for (const w of want) {
        const i = got.findIndex((g) => (w instanceof RegExp ? w.test(g) : g === w));
        assert.ok(i >= 0, `${id}: no log line ${w} in ${short(got, 3000)}`);
        got.splice(i, 1);
      }
    }
  });

  test("workflow logs: filter by several labels or workflow urls (OR), by host and by path", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    const k = tag();
    const route = async (ctx) => {
      await ctx.run("never", () => "delayed a minute");
    };
    const [urlA, urlB, urlC] = ["a", "b", "c"].map((x) => host.workflow(`/logs-${x}-${k}`, route));
    const other = host.url(`/logs-host-${k}`).replace("127.0.0.1", "localhost");
    host.workflow(`/logs-host-${k}`, route);
    // Single-label runs: what a run with several labels reports as `label` is another test.
    const [lA, lB, lC] = ["a", "b", "c"].map((x) => `or-${x}-${k}`);
    const start = (url, label) => client.trigger({ url, delay: "1m", ...(label ? { label } : {}) }).then((r) => r.workflowRunId);
    const rA = await start(urlA, lA);
    const rB = await start(urlB, lB);
    const rC = await start(urlC, lC);
    const rHost = await start(other);
    t.after(() => client.cancel({ ids: [rA, rB, rC, rHost] }).catch(() => {}));

    const ids = async (filter) => new Set((await client.logs({ filter })).runs.map((r) => r.workflowRunId));
    let got = await ids({ label: [lA, lB] });
    assert.ok(got.has(rA) && got.has(rB) && !got.has(rC), `labels OR: ${[...got]}`);
    got = await ids({ workflowUrl: [urlA, urlC] });
    assert.ok(got.has(rA) && got.has(rC) && !got.has(rB), `workflow urls OR: ${[...got]}`);
    got = await ids({ host: new URL(other).host }); // host:port, as the URL has a port
    assert.ok(got.has(rHost) && !got.has(rA), `host: ${[...got]}`);
    got = await ids({ path: `/logs-b-${k}` });
    assert.deepEqual([...got], [rB], "path");
    assert.equal(host.records.length, 0, "nothing was delivered yet (delay 1m)");
  });
});
