// The behaviour that Upstash's own @upstash/workflow tests check against QStash (the routes of
// workflow-js examples/ci, and the live tests of workflow-js / qstash-js src/integration),
// checked here against duraton with the pinned SDK. docs/compatibility.md maps every Upstash
// test to the test here (or elsewhere in this suite) that checks the same thing.
//
// Like Upstash's tests, most runs here are started by a plain QStash publish to the serve()
// endpoint (not client.trigger): the SDK then starts the run itself, which costs one more
// delivery. Each test counts every request its endpoint received, as Upstash's tests do; the
// tests run concurrently, each on its own host, paths and run ids.

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client as QStashClient } from "@upstash/qstash";
import { WorkflowMiddleware } from "@upstash/workflow";
import { Host, newWfClient, env, api, tag, short, waitFor, waitForRun, sleep } from "./wflib.mjs";

const client = newWfClient();
const qstash = new QStashClient({ baseUrl: env.url, token: env.token });

const AUTH_FAIL =
  "Failed to authenticate Workflow request. If this is unexpected, see the caveat https://upstash.com/docs/workflow/basics/caveats#avoid-non-deterministic-code-outside-context-run";

/** Starts a run the way Upstash's tests do: a plain publishJSON to the workflow URL. */
const publishStart = (url, body, headers = {}, extra = {}) => qstash.publishJSON({ url, body, headers, ...extra });

/** The run id the SDK minted for a publish-started run, read off its deliveries. */
const runIdOf = (host, path) => waitFor(`a run id on the deliveries to ${path}`, () => host.deliveries(path).find((d) => d.runId)?.runId);

/** Waits until the deliveries to path have stayed at `count` for a while, and asserts it. */
async function assertSettledCount(host, path, count, { quietMs = 1500, timeoutMs = 30000 } = {}) {
  await waitFor(`${count} requests to ${path}`, () => host.deliveries(path).length >= count, {
    timeoutMs,
    describe: () => host.describe(path),
  });
  await sleep(quietMs);
  assert.equal(host.deliveries(path).length, count, `requests to ${path}: ${host.describe(path)}`);
}

describe("Upstash's workflow CI and integration routes", { concurrency: true }, () => {
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

  test("waitForEvent in parallel with a step: a timeout, or client.notify naming the waiter's url; 7 requests each", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    for (const notify of [false, true]) {
      const path = `/wait-${notify ? "notify" : "timeout"}`;
      const eventId = `my-event-id-${tag()}`;
      let result;
      const url = host.workflow(path, async (ctx) => {
        const first = await ctx.waitForEvent("single wait for event", eventId, { timeout: 1 });
        const [run, wait] = await Promise.all([
          ctx.run("run-step", () => "run-result"),
          ctx.waitForEvent("wait-event-step", eventId, { timeout: notify ? 10 : 3 }),
        ]);
        result = { first, run, wait };
      });
      await publishStart(url, "my-payload");
      let answer;
      if (notify) {
        // Notify only once the first wait (same event id) has timed out: its timeout delivery
        // (the third request) has been answered.
        await waitFor("the first wait to time out", () => host.deliveries(path).filter((d) => d.status).length >= 3, { describe: () => host.describe(path) });
        answer = await waitFor(`a waiter for ${eventId}`, async () => {
          const r = await client.notify({ eventId, eventData: "notify-body" });
          return r.length ? r : undefined;
        }, { intervalMs: 300 });
        assert.equal(answer[0].waiter.url, url, short(answer));
      }
      const runId = await runIdOf(host, path);
      await waitForRun(runId, { want: "RUN_SUCCESS", host, path });
      assert.deepEqual(result.first, { eventData: undefined, timeout: true });
      assert.equal(result.run, "run-result");
      assert.deepEqual(result.wait, notify ? { eventData: "notify-body", timeout: false } : { eventData: undefined, timeout: true });
      await assertSettledCount(host, path, 7, { quietMs: 500 });
    }
  });

  test("context.notify from another run wakes the waiter; GET /v2/waiters shows its timeout url", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    for (const eventData of ["event-data", { event: "data" }]) {
      const eventId = `ctx-notify-${tag()}`;
      let woke;
      let waiters;
      let notified;
      const waitingUrl = host.workflow(`/waiting-${typeof eventData}`, async (ctx) => {
        woke = await ctx.waitForEvent("wait", eventId, { timeout: 20 });
      });
      const notifyingUrl = host.workflow(`/notifying-${typeof eventData}`, async (ctx) => {
        waiters = await ctx.run("check waiters", async () => {
          const r = await api("GET", `/v2/waiters/${eventId}`);
          if (!Array.isArray(r.json) || !r.json.length) throw new Error(`no waiter yet: ${r.text}`);
          return r.json;
        });
        const { notifyResponse } = await ctx.notify("notify-step", eventId, eventData);
        notified = notifyResponse.length;
      }, { retries: 5 });
      await publishStart(waitingUrl, undefined);
      await waitFor("the waiter", async () => (await api("GET", `/v2/waiters/${eventId}`)).json?.length);
      await publishStart(notifyingUrl, undefined);
      await waitFor("the waiting run to wake", () => woke, { describe: () => host.describe() });
      assert.deepEqual(woke, { eventData, timeout: false });
      await waitFor("the notifying run to finish", () => notified !== undefined, { describe: () => host.describe() });
      assert.equal(notified, 1);
      assert.equal(waiters[0].timeoutUrl, waitingUrl);
      assert.equal(waiters[0].timeoutBody, undefined);
      assert.equal(typeof waiters[0].timeoutHeaders, "object", short(waiters[0]));
    }
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
  test("webhooks: an uncalled one times out; one called (by a context.call target) before the wait still resumes it; 8 requests from client.trigger", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    const caller = await Host.start(t);
    const callerUrl = caller.plain("/caller", async ({ body }) => {
      const { webhookUrl } = JSON.parse(body);
      const r = await fetch(webhookUrl, { method: "PATCH", headers: { "content-type": "application/json", "webhook-test-header": "webhook-test-value" }, body: JSON.stringify({ test: "webhook-body" }) });
      return { status: r.ok ? 200 : 502, body: `webhook answered ${r.status}` };
    });
    let out;
    const url = host.workflow("/webhook", async (ctx) => {
      const timeoutHook = await ctx.createWebhook("timeout webhook");
      const timedOut = await ctx.waitForWebhook("wait for timeout webhook", timeoutHook, "1s");
      const webhook = await ctx.createWebhook("create webhook");
      const called = await ctx.call("call webhook caller", { url: callerUrl, method: "POST", body: JSON.stringify({ webhookUrl: webhook.webhookUrl }) });
      const res = await ctx.waitForWebhook("wait for webhook", webhook, "30s");
      const got = res.timeout ? undefined : { url: res.request.url, method: res.request.method, header: res.request.headers.get("webhook-test-header"), body: await res.request.json() };
      out = await ctx.run("verify complete", () => ({ timedOut: { timeout: timedOut.timeout, request: timedOut.request ?? null }, called: called.status, hook: webhook.webhookUrl, got }));
    });
    const { workflowRunId: runId } = await client.trigger({ url, body: { test: "webhook-payload" }, headers: { "test-header-webhook": "webhook-header-value" } });
    await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/webhook" });
    assert.deepEqual(out.timedOut, { timeout: true, request: null });
    assert.equal(out.called, 200);
    assert.deepEqual(out.got, { url: out.hook, method: "PATCH", header: "webhook-test-value", body: { test: "webhook-body" } });
    await assertSettledCount(host, "/webhook", 8);
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
  test("waitForEvent in parallel with a context.call whose target notifies; a call to a serve() endpoint starts a run that notifies with text, then an object", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    const k = tag();
    const cfg = { sdkEventId: `sdk-event-${k}`, textEventId: `text-event-${k}`, objectEventId: `object-event-${k}` };
    const notifier = host.plain("/notifier", async ({ body }) => {
      const { sdkEventId } = JSON.parse(body);
      setTimeout(() => client.notify({ eventId: sdkEventId, eventData: "notified-by-sdk" }).catch(() => {}), 1000);
      return { status: 200, body: "notifying..." };
    });
    let notifierDone = false;
    const notifierWorkflow = host.workflow("/notifier-workflow", async (ctx) => {
      for (const [id, data] of [[ctx.requestPayload.textEventId, "text-event-data"], [ctx.requestPayload.objectEventId, { event: "object-event-data" }]]) {
        let notified = false;
        for (let i = 1; i <= 3 && !notified; i++) {
          await ctx.sleep(`sleeping before ${id} ${i}/3`, 1);
          const { notifyResponse } = await ctx.notify(`notify ${id} ${i}/3`, id, data);
          notified = notifyResponse.length > 0;
        }
        if (!notified) throw new Error(`nobody waited for ${id}`);
      }
      await ctx.run("done", () => (notifierDone = true));
    }, { retries: 0 });
    let out;
    const url = host.workflow("/wait-for-event", async (ctx) => {
      const first = await ctx.waitForEvent("wait for event which should timeout", `random-event-${k}`, { timeout: 1 });
      const [sdkCall, sdkWait] = await Promise.all([
        ctx.call("start notifying endpoint", { url: notifier, method: "POST", body: JSON.stringify(cfg) }),
        ctx.waitForEvent("wait sdk", cfg.sdkEventId, { timeout: 5 }),
      ]);
      const [textCall, textWait] = await Promise.all([
        ctx.call("start notifying workflow", { url: notifierWorkflow, method: "POST", body: JSON.stringify(cfg) }),
        ctx.waitForEvent("wait text", cfg.textEventId, { timeout: 10 }),
      ]);
      const objectWait = await ctx.waitForEvent("wait object", cfg.objectEventId, { timeout: 10 });
      out = await ctx.run("keep", () => ({ first, sdkCall: [sdkCall.status, sdkCall.body], sdkWait, textCall: [textCall.status, typeof textCall.body?.workflowRunId], textWait, objectWait }));
    }, { retries: 0 });
    const { workflowRunId: runId } = await client.trigger({ url, body: "my-payload", headers: { "test-header-foo": "header-foo" } });
    await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wait-for-event", timeoutMs: 40000, extra: () => host.describe("/notifier-workflow") });
    assert.deepEqual(out, {
      first: { timeout: true }, // through the keep step's JSON: eventData undefined is dropped
      sdkCall: [200, "notifying..."],
      sdkWait: { eventData: "notified-by-sdk", timeout: false },
      textCall: [200, "string"],
      textWait: { eventData: "text-event-data", timeout: false },
      objectWait: { eventData: { event: "object-event-data" }, timeout: false },
    });
    await waitFor("the notifying workflow to finish", () => notifierDone, { describe: () => host.describe("/notifier-workflow") });
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
