// What Upstash's own @upstash/workflow tests check against QStash about waits, notify and
// webhooks (workflow-js examples/ci wait-for-event and webhook, src/integration wait tests),
// checked against duraton.
// docs/compatibility.md maps every Upstash test to the test here (or elsewhere in this suite)
// that checks the same thing. The tests run concurrently, each on its own host, paths and run
// ids; like Upstash's, they count every request their endpoint gets.

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { Host, newWfClient, api, tag, short, waitFor, waitForRun } from "./wflib.mjs";
import { publishStart, runIdOf, assertSettledCount } from "./upstashlib.mjs";

const client = newWfClient();

describe("Upstash's workflow CI and integration routes: waits, notify, webhooks", { concurrency: true }, () => {
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
});
