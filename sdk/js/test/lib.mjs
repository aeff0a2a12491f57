// Helpers for the SDK's tests: they run against a real `duraton dev` process, started by
// cmd/duraton/sdkjs_test.go (go test), which passes its credentials in QSTASH_* (and a
// second process with --project-ceiling 1 in DURATON_CEILING_*, a third for the flooding
// rateLimit test in DURATON_FLOOD_*). Routes are served by the
// built package (dist/) on a node:http server bound to 127.0.0.1.

import http from "node:http";
import crypto from "node:crypto";
import { Client, serve } from "../dist/index.js";

for (const v of ["QSTASH_DEV", "QSTASH_DEV_PORT", "QSTASH_REGION", "UPSTASH_WORKFLOW_URL", "DURATON_URL", "DURATON_TOKEN"]) delete process.env[v];

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through cmd/duraton (go test -run TestSDKJS)`);
  return v;
}

/** The main duraton process's environment (what `duraton dev` prints). */
export const env = {
  QSTASH_URL: need("QSTASH_URL"),
  QSTASH_TOKEN: need("QSTASH_TOKEN"),
  QSTASH_CURRENT_SIGNING_KEY: need("QSTASH_CURRENT_SIGNING_KEY"),
  QSTASH_NEXT_SIGNING_KEY: need("QSTASH_NEXT_SIGNING_KEY"),
};

/** The environment of the second process, whose project ceiling is 1 (priority is seen there). */
export const ceilingEnv = () => ({
  QSTASH_URL: need("DURATON_CEILING_URL"),
  QSTASH_TOKEN: need("DURATON_CEILING_TOKEN"),
  QSTASH_CURRENT_SIGNING_KEY: need("DURATON_CEILING_CURRENT_SIGNING_KEY"),
  QSTASH_NEXT_SIGNING_KEY: need("DURATON_CEILING_NEXT_SIGNING_KEY"),
});

/** The environment of a third process for the test that floods its project with runs. */
export const floodEnv = () => ({
  QSTASH_URL: need("DURATON_FLOOD_URL"),
  QSTASH_TOKEN: need("DURATON_FLOOD_TOKEN"),
  QSTASH_CURRENT_SIGNING_KEY: need("DURATON_FLOOD_CURRENT_SIGNING_KEY"),
  QSTASH_NEXT_SIGNING_KEY: need("DURATON_FLOOD_NEXT_SIGNING_KEY"),
});

export const client = new Client({ env });
export const tag = () => crypto.randomBytes(4).toString("hex");
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const short = (v, n = 400) => {
  const s = typeof v === "string" ? v : JSON.stringify(v);
  return s === undefined ? "undefined" : s.length > n ? s.slice(0, n) + "…" : s;
};

/** Polls fn until it returns a truthy value; fails naming `what` and the last state. */
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
      const state = describe ? `\n  state: ${short(await describe())}` : "";
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastErr ? ` (last error: ${lastErr.message})` : ""}${state}`);
    }
    await sleep(intervalMs);
  }
}

const terminal = ["succeeded", "failed", "cancelled"];

/** GET /runs/{id} until the run is terminal; returns it. */
export async function runEnded(runId, { c = client, timeoutMs = 20000 } = {}) {
  let last;
  return waitFor(`run ${runId} to end`, async () => {
    last = await c.getRun(runId);
    return terminal.includes(last.status) ? last : undefined;
  }, { timeoutMs, intervalMs: 100, describe: () => last });
}

/** Every run of a workflow (newest first, following the cursor), optionally of one status. */
export async function allRuns(workflow, { c = client, status } = {}) {
  const runs = [];
  let cursor;
  for (let page = 0; page < 100; page++) {
    const r = await c.listRuns({ workflow, status, cursor, limit: 1000 });
    runs.push(...r.runs);
    cursor = r.cursor;
    if (!cursor || r.runs.length === 0) break;
  }
  return runs;
}

/** The runs of a workflow (newest first), once there are at least n (of status, when given). */
export async function runsOf(workflow, n, { c = client, status, timeoutMs = 20000 } = {}) {
  let last;
  return waitFor(`${n} runs of ${workflow}${status ? ` ${status}` : ""}`, async () => {
    last = await allRuns(workflow, { c, status });
    return last.length >= n ? last : undefined;
  }, { timeoutMs, intervalMs: 200, describe: () => `${last?.length} runs: ${short(last?.slice(0, 3))}` });
}

/** A step's recorded output (the server shows it as its JSON value). */
export function out(run, stepName) {
  const s = run.steps.find((x) => x.name === stepName);
  if (!s) throw new Error(`run ${run.runId} has no step ${stepName}: ${short(run.steps.map((x) => x.name))}`);
  return s.out;
}

/**
 * Starts a node:http server on 127.0.0.1 and serves the app's workflows under
 * /api/<app> with the package's Node adapter (or the listener `mount` returns); the
 * server is closed when the test ends. Returns the Served object and the server's base URL.
 */
export async function host(t, { app, workflows, env: e = env, mount, registerOnStart = false, ...rest }) {
  let listener = (_req, res) => res.writeHead(503).end();
  const server = http.createServer((req, res) => listener(req, res));
  server.keepAliveTimeout = 2000;
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const base = `http://127.0.0.1:${server.address().port}`;
  t.after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(() => r()));
  });
  const served = serve({ app, workflows, baseUrl: `${base}/api/${app}`, env: e, registerOnStart, ...rest });
  listener = mount ? mount(served) : served.node;
  if (!registerOnStart) await served.registerApp();
  else await served.ready;
  return { served, base };
}

/** Tracks how many calls are inside fn at once, per key. */
export class Gauge {
  constructor() {
    this.now = new Map();
    this.max = new Map();
    this.total = 0;
  }
  async around(key, fn) {
    const n = (this.now.get(key) ?? 0) + 1;
    this.now.set(key, n);
    this.max.set(key, Math.max(this.max.get(key) ?? 0, n));
    this.total++;
    try {
      return await fn();
    } finally {
      this.now.set(key, this.now.get(key) - 1);
    }
  }
}

/**
 * The ways a delivery is answered: "inline" (Duraton's offer taken), "api"
 * (serve({ inlineAnswers: false })), "no-offer" (the offer stripped on the way in, as from
 * QStash or an older Duraton: @upstash/workflow answers), "mixed" and "mixed-first" (the
 * offer stripped from every other delivery, from the second or from the first on, so a
 * run moves between the two runtimes all along).
 */
export const modes = ["inline", "api", "no-offer", "mixed", "mixed-first"];

/** host() options for mode, recording every answer in answers (see recording). */
export function modeOptions(mode, answers = []) {
  const strip = mode === "no-offer" ? "all" : mode === "mixed" ? "alternate" : mode === "mixed-first" ? "alternate-first" : false;
  return { inlineAnswers: mode !== "api", mount: recording(answers, strip) };
}

/**
 * Mounts served.node and keeps every answer's path, status, Duraton-Inline header and
 * (for an inline answer) body. strip: "all" (or true) takes the Duraton-Inline offer off
 * every delivery on the way in, "alternate" off every other one (the second, fourth, ...),
 * "alternate-first" off the first, third, ...
 */
export function recording(answers, strip = false) {
  let n = 0;
  const stripped = () => strip === true || strip === "all" || (strip === "alternate" && n++ % 2 === 1) || (strip === "alternate-first" && n++ % 2 === 0);
  return (s) => (req, res) => {
    if (stripped()) delete req.headers["duraton-inline"];
    const writeHead = res.writeHead;
    const end = res.end;
    let rec;
    res.writeHead = function (status, ...rest) {
      const h = rest.find((x) => x && typeof x === "object" && !Array.isArray(x)) ?? {};
      rec = { path: req.url, status, inline: h["duraton-inline"] ?? null, inlineSteps: Number(h["duraton-inline-steps"] ?? 0) };
      answers.push(rec);
      return writeHead.call(this, status, ...rest);
    };
    res.end = function (chunk, ...rest) {
      if (rec?.inline && chunk !== undefined && typeof chunk !== "function") rec.body = Buffer.from(chunk).toString("utf8");
      return end.call(this, chunk, ...rest);
    };
    s.node(req, res);
  };
}

/** The step messages inline answers carried: each entry's headers and its step object. */
export function inlineMessages(answers) {
  const msgs = [];
  for (const a of answers) {
    if (!a.body) continue;
    const batch = a.inline === "steps" ? a.body : a.inline === "end" && a.inlineSteps > 0 ? Buffer.from(a.body).subarray(0, a.inlineSteps).toString("utf8") : undefined;
    if (!batch) continue;
    for (const e of JSON.parse(batch)) msgs.push({ path: a.path, headers: e.headers, step: JSON.parse(e.body) });
  }
  return msgs;
}
