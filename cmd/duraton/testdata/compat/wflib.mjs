// Shared helpers for the @upstash/workflow compatibility tests (wf-*.test.mjs) and the
// workflow load / crash scripts (load/*.mjs).
//
// Workflow endpoints are built with the official serve() of @upstash/workflow 1.3.3 and
// mounted on a node:http server bound to 127.0.0.1. Both signing keys are handed to serve(),
// so the SDK verifies EVERY delivery with its own Receiver (a delivery that fails verification
// is answered 500 "Failed to verify …", which these helpers report as a protocol failure).
// Runs are triggered with the official workflow Client; terminal states are read from
// duraton's run-logs API (GET /v2/workflows/events?workflowRunId=…).

import http from "node:http";
import crypto from "node:crypto";
import assert from "node:assert/strict";
import { Client, serve, WorkflowNonRetryableError } from "@upstash/workflow";

export { Client, serve, WorkflowNonRetryableError };

// QSTASH_DEV / QSTASH_REGION make the SDKs ignore QSTASH_URL (dev mode would even try to
// download a binary), so they must never reach the SDK.
for (const v of ["QSTASH_DEV", "QSTASH_DEV_PORT", "QSTASH_REGION", "UPSTASH_WORKFLOW_URL"]) delete process.env[v];

function requireEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through cmd/duraton (go test)`);
  return v;
}

export const env = {
  url: requireEnv("QSTASH_URL").replace(/\/$/, ""),
  token: requireEnv("QSTASH_TOKEN"),
  currentSigningKey: requireEnv("QSTASH_CURRENT_SIGNING_KEY"),
  nextSigningKey: requireEnv("QSTASH_NEXT_SIGNING_KEY"),
};

/** The env object handed to serve(): credentials and BOTH signing keys (verification on). */
export const serveEnv = () => ({
  QSTASH_URL: env.url,
  QSTASH_TOKEN: env.token,
  QSTASH_CURRENT_SIGNING_KEY: env.currentSigningKey,
  QSTASH_NEXT_SIGNING_KEY: env.nextSigningKey,
});

/** The official workflow client, pointed at duraton. */
export function newWfClient() {
  return new Client({ baseUrl: env.url, token: env.token });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const tag = () => crypto.randomBytes(5).toString("hex");
export const short = (v, n = 400) => {
  let s;
  try {
    s = typeof v === "string" ? v : JSON.stringify(v);
  } catch {
    s = String(v);
  }
  if (s === undefined) return "undefined";
  return s.length > n ? s.slice(0, n) + "…" : s;
};

/**
 * Polls fn until it returns a truthy value and returns that value. Errors thrown by fn count
 * as "not yet". Throws, naming `what`, the last error and describe() (if given), once
 * timeoutMs has passed.
 */
export async function waitFor(what, fn, { timeoutMs = 20000, intervalMs = 50, describe } = {}) {
  const deadline = Date.now() + timeoutMs;
  let lastErr;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      lastErr = e;
    }
    if (Date.now() >= deadline) {
      const why = lastErr ? ` (last error: ${lastErr?.message ?? lastErr})` : "";
      let extra = "";
      if (describe) {
        try {
          extra = `\n  state: ${await describe()}`;
        } catch (e) {
          extra = `\n  state: <describe failed: ${e?.message ?? e}>`;
        }
      }
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}${extra}`);
    }
    await sleep(intervalMs);
  }
}

// ---------------------------------------------------------------------------------------
// duraton API (raw fetch: the run-logs shape is duraton's contract, read it directly)

/** Authenticated raw fetch against duraton; returns {status, text, json}. */
export async function api(method, path, { headers = {}, body } = {}) {
  const res = await fetch(env.url + path, {
    method,
    headers: { Authorization: `Bearer ${env.token}`, ...headers },
    body,
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, text, json };
}

/** GET /v2/workflows/events?workflowRunId=… → the run's log entry, or undefined. */
export async function readLogs(runId) {
  const r = await api("GET", `/v2/workflows/events?workflowRunId=${encodeURIComponent(runId)}`);
  if (r.status !== 200) throw new Error(`GET /v2/workflows/events?workflowRunId=${runId}: HTTP ${r.status} ${short(r.text, 200)}`);
  if (!r.json || !Array.isArray(r.json.runs)) throw new Error(`GET /v2/workflows/events: no "runs" array in ${short(r.text, 200)}`);
  return r.json.runs.find((x) => x.workflowRunId === runId);
}

/**
 * Flattens a run log's step groups into one list of steps (acceptance order), without the
 * run's "Initial" entry (stepId 0, the trigger payload), which the logs may show first as
 * the real Upstash logs do. allSteps keeps it.
 */
export function loggedSteps(run) {
  return allSteps(run).filter((s) => s.stepType !== "Initial");
}

export function allSteps(run) {
  const out = [];
  for (const group of run?.steps ?? []) {
    if (group.type === "next") continue; // deliveries whose steps are not recorded: nextSteps
    for (const s of group.steps ?? []) out.push({ ...s, groupType: group.type });
  }
  return out;
}

/** The run log's "next" group entries: deliveries in progress, retrying, or the one that failed the run. */
export function nextSteps(run) {
  return (run?.steps ?? []).filter((g) => g.type === "next").flatMap((g) => g.steps ?? []);
}

/** Compact description of a run log (for failure messages). */
export function describeRun(run) {
  if (!run) return "run not in logs";
  const steps = allSteps(run)
    .map((s) => `${s.stepId}:${s.stepName}/${s.stepType}${s.groupType === "parallel" ? "(p)" : ""}`)
    .join(" ");
  return `${run.workflowState} steps=[${steps}]${run.workflowRunResponse !== undefined ? ` response=${short(run.workflowRunResponse, 120)}` : ""}`;
}

export const TERMINAL = ["RUN_SUCCESS", "RUN_FAILED", "RUN_CANCELED"];

/**
 * Polls the run logs until the run is in a terminal state and returns the run log entry.
 * Fails if the terminal state is not `want` (when given). States in `ignore` do not count as
 * terminal (e.g. the old RUN_FAILED of a run resumed under the same id).
 */
export async function waitForRun(runId, { want, ignore = [], timeoutMs = 30000, host, path, extra } = {}) {
  let last;
  const run = await waitFor(
    `run ${runId} to reach a terminal state${want ? ` (want ${want})` : ""}`,
    async () => {
      last = await readLogs(runId);
      return last && TERMINAL.includes(last.workflowState) && !ignore.includes(last.workflowState) ? last : undefined;
    },
    {
      timeoutMs,
      intervalMs: 100,
      describe: () => `${describeRun(last)}${host ? " | " + host.describe(path, runId) : ""}${extra ? " | " + extra() : ""}`,
    },
  );
  if (want) {
    assert.equal(
      run.workflowState,
      want,
      `run ${runId} ended as ${run.workflowState}, want ${want}: ${describeRun(run)}${host ? " | " + host.describe(path, runId) : ""}`,
    );
  }
  return run;
}

/** Asserts that each stepId in `ids` is recorded exactly once (callType step) and no other. */
export function assertStepIds(run, ids, what = "") {
  const initial = allSteps(run).filter((s) => s.stepType === "Initial");
  assert.ok(initial.length <= 1, `${what} at most one Initial entry: ${describeRun(run)}`);
  const steps = loggedSteps(run);
  const got = steps.map((s) => s.stepId).sort((a, b) => a - b);
  assert.deepEqual(got, [...ids].sort((a, b) => a - b), `${what} recorded stepIds: ${describeRun(run)}`);
}

// ---------------------------------------------------------------------------------------
// HTTP host for serve() endpoints and plain third-party routes

const header = (headers, name) => {
  const v = headers[name.toLowerCase()];
  return Array.isArray(v) ? v.join(", ") : v;
};

/**
 * One node:http server on 127.0.0.1 routing by path to serve() endpoints or plain handlers.
 * Every request is recorded raw (method, url, headers, body) together with the answer.
 */
export class Host {
  constructor() {
    this.routes = new Map();
    this.records = [];
    this.sockets = new Set();
  }

  /** Starts a host; with a node:test context `t`, it is closed when the test ends. */
  static async start(t) {
    const h = new Host();
    h.server = http.createServer((req, res) => h._handle(req, res));
    h.server.keepAliveTimeout = 2000;
    h.server.on("connection", (s) => {
      h.sockets.add(s);
      s.on("close", () => h.sockets.delete(s));
    });
    await new Promise((resolve, reject) => {
      h.server.once("error", reject);
      h.server.listen(0, "127.0.0.1", resolve);
    });
    h.base = `http://127.0.0.1:${h.server.address().port}`;
    if (t) t.after(() => h.close());
    return h;
  }

  async close() {
    if (!this.server) return;
    this.server.closeAllConnections?.();
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server.close(() => r()));
    this.server = undefined;
  }

  url(path) {
    return this.base + path;
  }

  /** Mounts routeFunction with the official serve(); returns the workflow URL. */
  workflow(path, routeFunction, options = {}) {
    const { handler } = serve(routeFunction, { env: serveEnv(), ...options });
    this.routes.set(path, { kind: "workflow", handler });
    return this.url(path);
  }

  /** Mounts a plain handler fn({req, body, rec}) → {status, headers, body}. */
  plain(path, fn) {
    this.routes.set(path, { kind: "plain", fn });
    return this.url(path);
  }

  _handle(req, res) {
    const pathname = req.url.split("?")[0];
    const rec = {
      at: Date.now(),
      method: req.method,
      path: pathname,
      url: this.base + req.url,
      headers: req.headers,
      header: (name) => header(req.headers, name),
      runId: header(req.headers, "upstash-workflow-runid"),
      body: "",
      status: undefined,
      respBody: undefined,
      doneAt: undefined, // Date.now() right after the answer was handed to the socket
    };
    this.records.push(rec);
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      rec.body = Buffer.concat(chunks).toString("utf8");
      const route = this.routes.get(pathname);
      try {
        if (!route) {
          rec.status = 404;
          res.writeHead(404, { "content-type": "text/plain" });
          res.end(`no route ${pathname}`);
          rec.doneAt = Date.now();
          return;
        }
        if (route.kind === "plain") {
          const out = (await route.fn({ req, body: rec.body, rec })) ?? {};
          rec.status = out.status ?? 200;
          rec.respBody = out.body ?? "";
          // With a length, not chunked, as a serverless platform answers.
          res.writeHead(rec.status, { "content-length": String(Buffer.byteLength(rec.respBody)), ...(out.headers ?? {}) });
          res.end(rec.respBody);
          rec.doneAt = Date.now();
          return;
        }
        const headers = new Headers();
        for (const [k, v] of Object.entries(req.headers)) {
          if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : v);
        }
        const webReq = new Request(rec.url, {
          method: req.method,
          headers,
          body: req.method === "GET" || req.method === "HEAD" ? undefined : rec.body,
        });
        const webRes = await route.handler(webReq);
        const text = await webRes.text();
        rec.status = webRes.status;
        rec.respBody = text;
        // Content-Length set, as a serverless platform answers (not chunked).
        rec.respHeaders = { ...Object.fromEntries(webRes.headers.entries()), "content-length": String(Buffer.byteLength(text)) };
        res.writeHead(webRes.status, rec.respHeaders);
        res.end(text);
        rec.doneAt = Date.now();
      } catch (e) {
        rec.status = 599;
        rec.respBody = `host error: ${e?.stack ?? e}`;
        if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
        res.end(rec.respBody);
        rec.doneAt = Date.now();
      }
    });
  }

  /** Requests to path (optionally only those carrying Upstash-Workflow-RunId = runId). */
  deliveries(path, runId) {
    return this.records.filter((d) => d.path === path && (runId === undefined || d.runId === runId));
  }

  /** Human-readable summary of the deliveries to path, for failure messages. */
  describe(path, runId) {
    if (!path) return `${this.records.length} requests in total`;
    const ds = this.deliveries(path, runId);
    if (!ds.length) {
      const any = this.deliveries(path);
      return (
        `no deliveries reached ${path}${runId ? ` for ${runId}` : ""}` +
        (any.length ? ` (${any.length} to that path, run ids: ${[...new Set(any.map((d) => d.runId))].join(", ")})` : "")
      );
    }
    return (
      `${ds.length} deliveries to ${path}: ` +
      ds
        .map((d) => `[${d.status ?? "pending"}${kind(d)}${d.status && d.status >= 300 ? " " + short(d.respBody, 160) : ""}]`)
        .join(" ")
    );
  }
}

function kind(d) {
  if (d.header("upstash-workflow-failure-callback")) return " failure-cb";
  if (d.header("upstash-workflow-callback")) return " call-cb";
  return "";
}

/**
 * Checks every delivery of a run to path: Upstash-Workflow-RunId, Upstash-Message-Id,
 * Upstash-Retried and Upstash-Signature present, and none was rejected by the SDK's own
 * signature verification. Returns the deliveries.
 */
export function assertDeliveries(host, path, runId) {
  const ds = host.deliveries(path, runId);
  assert.ok(ds.length > 0, host.describe(path, runId));
  for (const d of ds) {
    const id = d.header("upstash-message-id");
    assert.ok(id, `delivery without Upstash-Message-Id: ${host.describe(path, runId)}`);
    assert.ok(d.header("upstash-retried") !== undefined, `delivery ${id} without Upstash-Retried`);
    assert.ok(d.header("upstash-signature"), `delivery ${id} without Upstash-Signature`);
    assert.ok(
      !/Failed to verify/i.test(d.respBody ?? ""),
      `delivery ${id} was rejected by the SDK's signature verification: ${short(d.respBody, 300)}`,
    );
    assert.ok(
      !/Incompatible|rawSteps is not iterable|Couldn't get workflow id/i.test(d.respBody ?? ""),
      `delivery ${id} broke the SDK protocol: ${short(d.respBody, 300)}`,
    );
  }
  return ds;
}

/** Polls client.notify until it reports at least one notified waiter; returns the answer. */
export async function notifyWhenWaiting(client, eventId, eventData, { timeoutMs = 15000, describe } = {}) {
  return waitFor(
    `a waiter for event ${eventId} (client.notify answering a non-empty list)`,
    async () => {
      const res = await client.notify({ eventId, eventData });
      return Array.isArray(res) && res.length > 0 ? res : undefined;
    },
    { timeoutMs, intervalMs: 150, describe },
  );
}

/** Runs fn over items with at most `limit` in flight. */
export async function pool(items, limit, fn) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** A logged `out` / workflowRunResponse: a JSON string (parsed here), or already a value. */
export function parseOut(v) {
  if (typeof v !== "string") return v;
  try {
    return JSON.parse(v);
  } catch {
    return v;
  }
}

/**
 * Lists the ids of the runs matching the logs filters (e.g. {state, workflowUrl}), following
 * the cursor through every page.
 */
export async function listRunIds(filters, { pageSize = 100, maxPages = 1000 } = {}) {
  const ids = new Set();
  let cursor;
  for (let page = 0; page < maxPages; page++) {
    const q = new URLSearchParams({ ...filters, count: String(pageSize) });
    if (cursor) q.set("cursor", cursor);
    const r = await api("GET", `/v2/workflows/events?${q}`);
    if (r.status !== 200 || !Array.isArray(r.json?.runs)) {
      throw new Error(`GET /v2/workflows/events?${q}: HTTP ${r.status} ${short(r.text, 200)}`);
    }
    for (const run of r.json.runs) ids.add(run.workflowRunId);
    cursor = r.json.cursor;
    if (!cursor || r.json.runs.length === 0) break;
  }
  return ids;
}
