// What Upstash's own @upstash/workflow tests check against QStash (the routes of workflow-js
// examples/ci and the live tests of workflow-js src/integration), checked against duraton:
// runs started by a plain publish, sleeps, early returns, failures and context.call results.
// docs/compatibility.md maps every Upstash test to the test here (or elsewhere in this suite)
// that checks the same thing. The tests run concurrently, each on its own host, paths and run
// ids; like Upstash's, they count every request their endpoint gets.

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { Host, newWfClient, tag, short, waitFor, waitForRun } from "./wflib.mjs";
import { AUTH_FAIL, publishStart, runIdOf, assertSettledCount } from "./upstashlib.mjs";

const client = newWfClient();

describe("Upstash's workflow CI and integration routes: runs, failures, calls", { concurrency: true }, () => {
  test("a publish-started run: unicode payload and forwarded headers reach the route; 2 steps in 4 requests", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    const payload = "“unicode-quotes”";
    let seen;
    const url = host.workflow("/path", async (ctx) => {
      if (ctx.headers.get("authentication") !== "Bearer secretPassword") return;
      const r1 = await ctx.run("step1", () => `processed '${ctx.requestPayload}'`);
      const r2 = await ctx.run("step2", () => `processed '${r1}'`);
      seen = { payload: ctx.requestPayload, header: ctx.headers.get("test-header-foo"), r2 };
    });
    await publishStart(url, payload, { Authentication: "Bearer secretPassword", "test-header-foo": "header-bar" });
    const runId = await runIdOf(host, "/path");
    await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/path" });
    await assertSettledCount(host, "/path", 4);
    assert.deepEqual(seen, { payload, header: "header-bar", r2: `processed 'processed '${payload}''` });
  });

  test("sleepUntil and sleep between publish-started steps: the gaps hold; 3 steps in 7 requests", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    let times;
    let planned; // the sleepUntil time of the invocation that planned it (unix s)
    const url = host.workflow("/sleep", async (ctx) => {
      const a = await ctx.run("step1", () => Date.now());
      const until = Date.now() / 1000 + 3;
      planned ??= until;
      await ctx.sleepUntil("sleep1", until);
      const b = await ctx.run("step2", () => Date.now());
      await ctx.sleep("sleep2", 2);
      const c = await ctx.run("step3", () => Date.now());
      times = { a, b, c };
    });
    await publishStart(url, undefined);
    const runId = await runIdOf(host, "/sleep");
    await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/sleep" });
    await assertSettledCount(host, "/sleep", 7);
    // The SDK rounds the sleepUntil time to whole seconds (Upstash-Not-Before), so the gap
    // after step1 is 3 s give or take half a second; the step never runs before that time.
    assert.ok(times.b >= Math.round(planned) * 1000, `step2 at ${times.b}, before the sleepUntil time ${Math.round(planned) * 1000}`);
    assert.ok(times.b - times.a >= 2500, `sleepUntil +3 s: ${times.b - times.a} ms`);
    assert.ok(times.c - times.b >= 2000, `sleep 2 s: ${times.c - times.b} ms`);
  });

  test("a sleep in parallel with two steps after retry sleeps (sleepWithoutAwait): 13 requests", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    const invoice = { date: 123, email: "my@mail.com", amount: 10 };
    let attempts = 0;
    let result;
    const url = host.workflow("/sleep-without-await", async (ctx) => {
      for (let i = 0; i < 3; i++) {
        const charge = await ctx.run("attemptCharge", () => ({ invoice: ctx.requestPayload, success: ++attempts === 3 }));
        if (charge.success) {
          const [amount, email, slept] = await Promise.all([
            ctx.run("updateDb", () => charge.invoice.amount),
            ctx.run("sendReceipt", () => charge.invoice.email),
            ctx.sleep("sleep", 5),
          ]);
          result = { amount, email, slept };
          return;
        }
        await ctx.sleep("retrySleep", 2);
      }
      await ctx.run("paymentFailed", () => true);
    });
    await publishStart(url, invoice);
    const runId = await runIdOf(host, "/sleep-without-await");
    await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/sleep-without-await", timeoutMs: 40000 });
    await assertSettledCount(host, "/sleep-without-await", 13);
    assert.deepEqual(result, { amount: 10, email: "my@mail.com", slept: undefined });
  });

  test("a route that returns before its first step is answered 400 (auth fail) once, with retries 0", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    let returned = 0;
    const url = host.workflow("/auth-fail", async (ctx) => {
      if (ctx.headers.get("authentication") !== "not-correct") {
        returned++;
        return;
      }
      await ctx.run("never", () => "no");
    });
    await publishStart(url, "my-payload", { authentication: "Bearer test-auth-super-secret" }, { retries: 0 });
    await assertSettledCount(host, "/auth-fail", 1, { quietMs: 3000 });
    const d = host.deliveries("/auth-fail")[0];
    assert.equal(d.status, 400, short(d.respBody));
    assert.equal(JSON.parse(d.respBody).message, AUTH_FAIL);
    assert.ok(returned >= 1);
  });

  test("a route that returns before a later step fails the run: failureFunction gets 400 and the auth-fail message; 3 requests", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    let executed = false;
    let returned = false;
    let failure;
    const url = host.workflow(
      "/returns-before-step",
      async (ctx) => {
        // Non-deterministic code: once the step has run, the route returns before it, so the
        // replay that delivers its result no longer reaches it and the SDK refuses it (400).
        // The failure callback must reach the step again, or the SDK refuses that too.
        if (executed && !returned) {
          returned = true;
          return;
        }
        await ctx.run("mock step", () => {
          executed = true;
        });
      },
      {
        retries: 0,
        failureFunction: async ({ failStatus, failResponse }) => {
          failure = { failStatus, failResponse };
        },
      },
    );
    const { workflowRunId: runId } = await client.trigger({ url, retries: 0 });
    await waitFor("the failureFunction", () => failure, { describe: () => host.describe("/returns-before-step") });
    assert.deepEqual(failure, { failStatus: 400, failResponse: AUTH_FAIL });
    await waitForRun(runId, { want: "RUN_FAILED", host, path: "/returns-before-step" });
    await assertSettledCount(host, "/returns-before-step", 3);
  });

  for (const kind of ["failureFunction", "failureUrl"]) {
    test(`context.call answered 401 is a result, not a failure: the ${kind} is not called; 5 requests (Upstash's route, without the keep step: 4)`, { timeout: 45000 }, async (t) => {
      const host = await Host.start(t);
      const third = await Host.start(t);
      const target = third.plain("/third-party", () => ({ status: 401, headers: { "Failing-Header": "failing-header-value" }, body: "failing request" }));
      const failureUrl = third.plain("/failure-url", () => ({ status: 200 }));
      let failed = false;
      let got;
      const url = host.workflow(
        `/call-401-${kind}`,
        async (ctx) => {
          const r = await ctx.call("patch call", { url: target, method: "PATCH", retries: 0 });
          got = await ctx.run("keep", () => ({ status: r.status, body: r.body, header: r.header["Failing-Header"] }));
        },
        kind === "failureFunction" ? { retries: 0, failureFunction: () => (failed = true) } : { retries: 0, failureUrl },
      );
      await publishStart(url, "my-payload", { "test-header-foo": "header-foo" });
      const runId = await runIdOf(host, `/call-401-${kind}`);
      await waitForRun(runId, { want: "RUN_SUCCESS", host, path: `/call-401-${kind}` });
      assert.deepEqual(got, { status: 401, body: "failing request", header: ["failing-header-value"] });
      await assertSettledCount(host, `/call-401-${kind}`, 5);
      assert.equal(failed, false, "the failureFunction must not run");
      assert.equal(third.deliveries("/failure-url").length, 0, "the failureUrl must not be called");
    });
  }

  test("trigger with failureUrl: a failing step posts the error (base64 JSON) with the run's headers to it; 1 request", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    const third = await Host.start(t);
    const failureUrl = third.plain("/failure", () => ({ status: 200 }));
    const message = `my-error-${tag()}`;
    const url = host.workflow("/failure-url", async (ctx) => {
      await ctx.run("step1", () => {
        throw new Error(message);
      });
    });
    const { workflowRunId: runId } = await client.trigger({ url, body: "my-payload", retries: 0, failureUrl, headers: { "test-header": "header-value" } });
    const cb = await waitFor("the failure URL call", () => third.deliveries("/failure")[0], { describe: () => host.describe("/failure-url") });
    const body = JSON.parse(cb.body);
    const err = JSON.parse(Buffer.from(body.body, "base64").toString());
    assert.equal(err.error, "Error");
    assert.equal(err.message, message);
    assert.equal(typeof err.stack, "string");
    assert.equal(cb.header("test-header"), "header-value", "the run's headers reach the failure URL");
    assert.equal(body.workflowRunId, runId);
    await waitForRun(runId, { want: "RUN_FAILED", host, path: "/failure-url" });
    await assertSettledCount(host, "/failure-url", 1);
  });

  test("context.call: POST to a 400 target, PUT with an empty body, DELETE with a JSON body come back as status, body and headers", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    const third = await Host.start(t);
    const target = third.plain("/target", async ({ req, body }) => {
      if (req.method === "POST") return { status: 400, body: `failing-response - ${body}` };
      if (req.method === "PUT") return { status: 300, body: "" };
      return { status: 400, headers: { "content-type": "application/json" }, body: JSON.stringify({ foo: "bar", zed: 2 }) };
    });
    let got;
    const url = host.workflow("/call-statuses", async (ctx) => {
      const post = await ctx.call("failing call", { url: target, body: "my-payload", method: "POST" });
      const put = await ctx.call("put call", { url: target, method: "PUT", retries: 0 });
      const del = await ctx.call("delete call", { url: target, method: "DELETE", retries: 0 });
      got = await ctx.run("keep", () => ({ post, put: { status: put.status, body: put.body }, del: { status: del.status, body: del.body } }));
    });
    await publishStart(url, "my-payload");
    const runId = await runIdOf(host, "/call-statuses");
    await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/call-statuses" });
    assert.equal(got.post.status, 400);
    assert.equal(got.post.body, "failing-response - my-payload");
    assert.deepEqual(got.put, { status: 300, body: "" });
    assert.deepEqual(got.del, { status: 400, body: { foo: "bar", zed: 2 } });
  });

  test("context.call with workflow headers to a serve() endpoint: the SDK there refuses it (500 failure, 400 callback and init)", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    const target = host.workflow("/auth-target", async () => {}, { failureFunction: () => {} });
    let got;
    const url = host.workflow("/auth-custom", async (ctx) => {
      // A string body: an object body does not reach duraton (see docs/compatibility.md).
      const body = JSON.stringify({ status: 200, header: "", body: "", url: "", sourceHeader: {}, sourceBody: "", workflowRunId: "", sourceMessageId: "" });
      const fail = await ctx.call("failure call should fail", { url: target, body, method: "POST", headers: { "Upstash-Workflow-Is-Failure": "true" } });
      const cb = await ctx.call("callback request should fail", { url: target, body, method: "POST", headers: { "Upstash-Workflow-Callback": "true" } });
      const init = await ctx.call("init call should fail", { url: target, body, method: "POST" });
      got = await ctx.run("keep", () => ({ fail: [fail.status, fail.body], cb: [cb.status, cb.body], init: [init.status, init.body] }));
    }, { retries: 0 });
    await publishStart(url, "my-payload");
    const runId = await runIdOf(host, "/auth-custom");
    await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/auth-custom" });
    assert.equal(got.fail[0], 500, short(got));
    assert.equal(got.fail[1].message, "Not authorized to run the failure function.", short(got));
    for (const k of ["cb", "init"]) {
      assert.equal(got[k][0], 400, short(got));
      assert.deepEqual(got[k][1], { message: AUTH_FAIL, workflowRunId: "no-workflow-id" }, short(got));
    }
    await assertSettledCount(host, "/auth-custom", 9); // Upstash's route has no "keep" step: 8
  });

  test("a context.call beyond the retries limit (412) fails the run without retries: the failureFunction gets 489, alone or in parallel", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    const third = await Host.start(t);
    const target = third.plain("/ok", () => ({ status: 200, body: "ok" }));
    for (const parallel of [false, true]) {
      const path = `/quota-${parallel ? "parallel" : "single"}`;
      let failure;
      const url = host.workflow(path, async (ctx) => {
        const huge = ctx.call("huge retry call", { url: target, method: "GET", retries: 1_000_000 });
        await (parallel ? Promise.all([ctx.call("normal call", { url: target, method: "GET", retries: 0 }), huge]) : huge);
      }, { failureFunction: ({ failStatus, failResponse }) => (failure = { failStatus, failResponse }) });
      const { workflowRunId: runId } = await client.trigger({ url, body: "test", retries: 0 });
      await waitForRun(runId, { want: "RUN_FAILED", host, path });
      await waitFor(`the failureFunction of ${path}`, () => failure, { describe: () => host.describe(path) });
      assert.equal(failure.failStatus, 489, short(failure));
      assert.match(failure.failResponse, /retries/i, short(failure));
    }
    assert.equal(third.deliveries("/ok").filter((d) => d.header("upstash-retries") === "1000000").length, 0, "the refused call never reaches the target");
  });
});
