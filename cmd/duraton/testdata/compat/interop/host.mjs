// Interop host, driven by cmd/duraton/interop_test.go (not a node:test file).
//
// One node:http server on 127.0.0.1 with:
//   /wf/interop/ts-flow    an official serve() workflow (run → sleep → Promise.all of two
//                          runs → returns an object); every delivery is verified by the SDK's
//                          own Receiver (both signing keys are handed to serve()).
//   /wf/interop/ts-three   an official serve() workflow of three sequential runs, for runs
//                          triggered over REST (POST /v2/trigger/{url}) without an SDK.
//   /wf/interop/ts-parent  an official serve() workflow that context.invoke()s the Go workflow
//                          behind /wf/interop/go-child and returns what it got back.
//   /wf/interop/go-child   a plain reverse proxy to GO_CHILD_URL (a Go sdk.Serve workflow in
//                          the test process): context.invoke derives the child URL from the
//                          parent URL (last path segment replaced by workflowId), so the child
//                          must live on this host; the proxy forwards method, headers and body
//                          untouched and returns the Go handler's answer.
//   /recv                  a plain endpoint verifying each request with the official
//                          @upstash/qstash Receiver (subject = the URL it was called at);
//                          answers 200 when valid, 401 when not.
//   /stats?path=P          JSON list of the requests the host got on path P:
//                          [{status, runId, messageId, signed, respBody}] (respBody cut).
//
// Protocol with the Go test, one JSON object per stdout line:
//   {"event":"ready","base":"http://127.0.0.1:PORT"}                        once, first
//   {"event":"verify","url","body","signature","messageId","valid","error"} per /recv request
//   {"event":"proxy","status","runId"}                                      per proxied request
// It exits when stdin closes (the Go test ends) or on SIGTERM / SIGINT.

import { Host } from "../wflib.mjs";
import { newReceiver } from "../lib.mjs";

const emit = (ev) => process.stdout.write(JSON.stringify(ev) + "\n");

const host = await Host.start();
const receiver = newReceiver();
const goChildURL = process.env.GO_CHILD_URL;

host.workflow("/wf/interop/ts-flow", async (ctx) => {
  const p = ctx.requestPayload ?? {};
  const doubled = await ctx.run("ts-double", () => p.n * 2);
  await ctx.sleep("ts-nap", 1);
  const [left, right] = await Promise.all([
    ctx.run("ts-left", () => `L${doubled}`),
    ctx.run("ts-right", () => ({ r: doubled + 1 })),
  ]);
  const hdr = ctx.headers.get("x-interop");
  return await ctx.run("ts-final", () => ({ from: "ts", doubled, left, right, hdr, name: p.name ?? null }));
});

host.workflow("/wf/interop/ts-three", async (ctx) => {
  const p = ctx.requestPayload ?? {};
  const a = await ctx.run("three-1", () => p.n + 1);
  const b = await ctx.run("three-2", () => a * 10);
  return await ctx.run("three-3", () => ({ from: "ts-three", a, b, hdr: ctx.headers.get("x-interop") }));
});

host.workflow("/wf/interop/ts-parent", async (ctx) => {
  const p = ctx.requestPayload ?? {};
  // An InvokableWorkflow as serveMany/createWorkflow build it: only workflowId matters for
  // the invoke (it names the child URL).
  const goChild = { workflowId: "go-child", routeFunction: undefined, options: {} };
  const r = await ctx.invoke("invoke-go", {
    workflow: goChild,
    body: { n: p.n },
    headers: { "x-interop": p.hdr ?? "" },
    workflowRunId: p.childRunId,
  });
  return await ctx.run("ts-after", () => ({ from: "ts-parent", child: r }));
});

const hopByHop = new Set(["host", "connection", "content-length", "transfer-encoding", "keep-alive", "upgrade", "te", "trailer", "expect"]);

host.plain("/wf/interop/go-child", async ({ req, body, rec }) => {
  if (!goChildURL) return { status: 503, body: "GO_CHILD_URL is not set" };
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined || hopByHop.has(k)) continue;
    headers.set(k, Array.isArray(v) ? v.join(", ") : v);
  }
  const query = req.url.includes("?") ? req.url.slice(req.url.indexOf("?")) : "";
  const res = await fetch(goChildURL + query, {
    method: req.method,
    headers,
    body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
  });
  const text = await res.text();
  emit({ event: "proxy", status: res.status, runId: rec.runId ?? null });
  const out = {};
  for (const [k, v] of res.headers.entries()) if (!hopByHop.has(k)) out[k] = v;
  return { status: res.status, headers: out, body: text };
});

host.plain("/recv", async ({ body, rec }) => {
  const url = rec.url; // base + path + query: what the message was published to
  const signature = rec.header("upstash-signature") ?? "";
  let valid = false;
  let error = null;
  try {
    valid = (await receiver.verify({ signature, body, url })) === true;
  } catch (e) {
    error = String(e?.message ?? e);
  }
  emit({ event: "verify", url, body, signature, messageId: rec.header("upstash-message-id") ?? null, valid, error });
  return valid ? { status: 200, body: "ok" } : { status: 401, body: `invalid signature: ${error}` };
});

host.plain("/stats", async ({ req }) => {
  const path = new URL(req.url, host.base).searchParams.get("path");
  const list = host.records
    .filter((r) => r.path === path)
    .map((r) => ({
      status: r.status ?? 0,
      runId: r.runId ?? "",
      messageId: r.header("upstash-message-id") ?? "",
      signed: !!r.header("upstash-signature"),
      respBody: (r.respBody ?? "").slice(0, 300),
    }));
  return { status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify(list) };
});

let closing = false;
async function shutdown() {
  if (closing) return;
  closing = true;
  await host.close();
  process.exit(0);
}
process.stdin.on("end", shutdown);
process.stdin.on("close", shutdown);
process.stdin.resume();
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);

emit({ event: "ready", base: host.base });
