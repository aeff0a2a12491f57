// serve({ app, workflows, baseUrl }): one route per workflow under the base path, as a
// Fetch-API handler with adapters for Node's http and Express, and the app's
// registration (PUT /apps/{app}), also run on start. A delivery that offers inline
// answers (Duraton) is run by the inline runtime (inline.ts); any other (QStash, an older
// Duraton, callbacks and failure callbacks) by @upstash/workflow's serve().

import type { IncomingMessage, ServerResponse } from "node:http";
import { Client as QStashClient, Receiver } from "@upstash/qstash";
import { serve as upstashServe } from "@upstash/workflow";
import { apiAt, type Answer } from "./answers.js";
import { Client, processEnv, type Env, type RegisteredApp, type WorkflowDefinitionJSON } from "./client.js";
import { controlNames } from "./controls.js";
import { Fallback, runInline, type Outcome } from "./inline.js";
import { makeInlineContext } from "./inline-context.js";
import { verifySignature } from "./verify.js";
import { failureError, makeContext, eventsOf, type Workflow } from "./workflow.js";

export interface ServeOptions {
  /** The app's name: registering replaces the app's whole set of workflows. */
  app: string;
  workflows: Workflow<any, any>[];
  /**
   * The public URL of the base path the routes live under, e.g.
   * "https://docs.example.com/api/workflows": workflow `index.documents` is served and
   * registered at ".../api/workflows/index.documents".
   */
  baseUrl: string;
  /** The Duraton client (default: new Client({ env })). */
  client?: Client;
  /** Where credentials and signing keys are read from (default: process.env). */
  env?: Env;
  /**
   * Signing keys that every delivery must carry a signature of (default:
   * $QSTASH_CURRENT_SIGNING_KEY and $QSTASH_NEXT_SIGNING_KEY; when neither is set,
   * deliveries are not verified).
   */
  signingKeys?: { current: string; next: string };
  /** Register the app as soon as serve() is called (default true); `ready` settles with the outcome. */
  registerOnStart?: boolean;
  /** Reports a failed registration on start (default: console.error). */
  onRegisterError?: (err: unknown) => void;
  /**
   * Answer deliveries that offer it inline, in one exchange per step (default true).
   * false: every step through the API calls of @upstash/workflow, as against QStash.
   */
  inlineAnswers?: boolean;
}

/** A Fetch-API handler: (Request) => Promise<Response>. */
export type FetchHandler = (req: Request) => Promise<Response>;

/** The minimum of an Express request and response the adapter uses (no dependency on express). */
export interface ExpressLikeRequest extends IncomingMessage {
  originalUrl?: string;
  body?: unknown;
}
export type ExpressLikeResponse = ServerResponse;
export type ExpressMiddleware = (req: ExpressLikeRequest, res: ExpressLikeResponse, next: (err?: unknown) => void) => void;

/** What serve() returns: the Fetch-API handler itself, with its adapters and the app's registration. */
export interface Served extends FetchHandler {
  /** The same Fetch-API handler: every workflow route (404 for any other path). */
  fetch: FetchHandler;
  /** A node:http request listener. */
  node: (req: IncomingMessage, res: ServerResponse) => void;
  /** Express middleware: mount it before body parsers, or with express.raw({ type: "*\/*" }). */
  express: () => ExpressMiddleware;
  /** PUT /apps/{app} with every workflow's definition (idempotent). */
  registerApp: () => Promise<RegisteredApp>;
  /** The registration run on start (undefined with registerOnStart: false). */
  ready: Promise<RegisteredApp> | undefined;
  /** The definitions as they are registered. */
  definitions: WorkflowDefinitionJSON[];
  /** The URL a workflow is served at. */
  urlOf: (workflow: string | { name: string }) => string;
}

/** Serves the app's workflows; see ServeOptions. */
export function serve(opts: ServeOptions): Served {
  const env = opts.env ?? processEnv();
  const client = opts.client ?? new Client({ env });
  const base = new URL(opts.baseUrl);
  const baseUrl = base.href.replace(/\/+$/, "");
  const basePath = base.pathname.replace(/\/+$/, "");
  const urlOf = (w: string | { name: string }) => `${baseUrl}/${typeof w === "string" ? w : w.name}`;

  const seen = new Set<string>();
  for (const w of opts.workflows) {
    if (w?.kind !== "duraton.workflow") throw new Error("duraton: serve: workflows must be made with workflow({...})");
    if (seen.has(w.name)) throw new Error(`duraton: serve: two workflows named ${w.name}`);
    seen.add(w.name);
  }
  const definitions = opts.workflows.map((w) => definition(w, urlOf(w)));

  const current = opts.signingKeys?.current ?? env.QSTASH_CURRENT_SIGNING_KEY;
  const next = opts.signingKeys?.next ?? env.QSTASH_NEXT_SIGNING_KEY;
  const receiver = current && next ? new Receiver({ currentSigningKey: current, nextSigningKey: next }) : undefined;
  const qstashClient = new QStashClient({ baseUrl: client.url, token: client.token ?? "" });

  // A workflow() given to ctx.step.invoke must be one of these (any other by its URL).
  const siblingURL = (name: string) => {
    if (!seen.has(name)) throw new Error(`duraton: invoke: workflow ${name} is not served by this serve() (app ${opts.app}): pass its URL`);
    return urlOf(name);
  };
  const routes = new Map<string, Route>();
  // @upstash/workflow hands its failure function only the `message` of the failed answer;
  // the whole answer (a budget stop's code, spend and cap) is kept here per run while the
  // failure callback is handled.
  const failureBodies = new Map<string, string>();
  const keepFailureBody =
    (h: FetchHandler): FetchHandler =>
    async (req) => {
      if (req.headers.get("upstash-workflow-is-failure") !== "true" && !req.headers.get("upstash-workflow-failure-callback")) return h(req);
      let runId: string | undefined;
      try {
        const p = JSON.parse(await req.clone().text()) as { workflowRunId?: unknown; body?: unknown };
        if (typeof p.workflowRunId === "string" && typeof p.body === "string") {
          runId = p.workflowRunId;
          failureBodies.set(runId, decodeBase64(p.body));
        }
      } catch {
        /* not the failure payload: @upstash/workflow answers it */
      }
      try {
        return await h(req);
      } finally {
        if (runId) failureBodies.delete(runId);
      }
    };
  const keys = current && next ? { current, next } : undefined;
  const api = apiAt(client.url, client.token);
  const inlineOn = opts.inlineAnswers ?? true;
  // Workflows whose handler read ctx.upstash: their deliveries go to @upstash/workflow.
  const upstashOnly = new Set<string>();
  const inlineRoute =
    (wf: Workflow): InlineRoute =>
    async (get, all, body) => {
      const runId = get("upstash-workflow-runid");
      if (!runId) return Fallback;
      if (keys) {
        try {
          verifySignature(get("upstash-signature"), body, keys);
        } catch {
          return Fallback; // @upstash/workflow's receiver refuses it with its own answer
        }
      }
      const d = {
        runId,
        url: urlOf(wf),
        inlineMax: inlineOffer(get),
        invokeCount: Number(get("upstash-workflow-invoke-count") ?? 0) || 0,
        createdAt: Number(get("upstash-workflow-createdat") ?? 0) || 0,
        api,
      };
      const text = typeof body === "string" ? body : body.toString("utf8");
      return runInline(d, text, (s) =>
        Promise.resolve(wf.handler(makeInlineContext(s, wf, opts.app, siblingURL, () => userHeaders(all()), (k) => get(k) ?? undefined, () => upstashOnly.add(wf.name), client))),
      );
    };
  // A delivery the inline runtime takes: it offers inline answers and is a step of a run.
  const inlineOf = (wf: string, get: HeaderGetter) =>
    inlineOn &&
    inlineOffer(get) > 0 &&
    get("upstash-workflow-sdk-version") === "1" &&
    !get("upstash-workflow-callback") &&
    !get("upstash-workflow-failure-callback") &&
    !get("upstash-workflow-is-failure") &&
    !get("upstash-workflow-unknown-sdk") &&
    !upstashOnly.has(wf);
  for (const wf of opts.workflows) {
    const { handler } = upstashServe(async (c) => wf.handler(makeContext(c, wf, opts.app, siblingURL, client)), {
      url: urlOf(wf),
      qstashClient,
      receiver,
      // serve() reads no env of its own: credentials and keys are the ones given here.
      env: {},
      disableTelemetry: true,
      failureFunction: wf.onFailure
        ? async ({ context, failStatus, failResponse }) => {
            const raw = failureBodies.get(context.workflowRunId);
            const { event, events } = eventsOf(context.requestPayload, context.workflowRunCreatedAt);
            await wf.onFailure!({
              event,
              events,
              runId: context.workflowRunId,
              workflow: context.headers.get("duraton-workflow") ?? wf.name,
              app: context.headers.get("duraton-app") ?? opts.app,
              error: failureError(failStatus, failResponse, raw),
            });
          }
        : undefined,
    });
    routes.set(`${basePath}/${wf.name}`, { name: wf.name, upstash: wf.onFailure ? keepFailureBody(handler) : handler, inline: inlineRoute(wf) });
  }

  const routeOf = (pathname: string) => {
    const path = pathname.replace(/\/+$/, "");
    try {
      return { path, route: routes.get(decodeURIComponent(path)) };
    } catch {
      return { path, route: undefined }; // a malformed %-escape names no workflow
    }
  };
  const fetchHandler: FetchHandler = async (req) => {
    const { path, route } = routeOf(new URL(req.url).pathname);
    if (!route) return json(404, { error: `no workflow of app ${opts.app} at ${path}` });
    if (req.method !== "POST") return json(405, { error: `${req.method} ${path}: workflow routes take POST` });
    const get: HeaderGetter = (k) => req.headers.get(k);
    if (!inlineOf(route.name, get)) return route.upstash(req);
    const body = await req.text();
    const out = await route.inline(get, () => req.headers, body);
    if (out === Fallback) return route.upstash(new Request(req.url, { method: req.method, headers: req.headers, body }));
    return new Response(out.body, { status: out.status, headers: out.headers });
  };
  // The Node adapters answer inline deliveries without a Fetch Request and Response.
  const nodeInline: NodeInline = async (pathname, req, res, body) => {
    const { route } = routeOf(pathname);
    if (!route || req.method !== "POST") return false;
    const get: HeaderGetter = (k) => {
      const v = req.headers[k];
      return v === undefined ? null : Array.isArray(v) ? v.join(", ") : v;
    };
    if (!inlineOf(route.name, get)) return false;
    const out = await route.inline(get, () => nodeHeaders(req), body);
    if (out === Fallback) return false;
    writeAnswer(res, out);
    return true;
  };

  let registration: Promise<RegisteredApp> | undefined;
  const registerApp = () => client.registerApp(opts.app, definitions);
  if (opts.registerOnStart ?? true) {
    registration = registerApp();
    const report = opts.onRegisterError ?? ((err: unknown) => console.error(`duraton: registering app ${opts.app}:`, err));
    registration.catch(report);
  }

  const parts: Omit<Served, keyof FetchHandler> = {
    fetch: fetchHandler,
    node: (req, res) => void toNode(fetchHandler, nodeInline, base, req, res, req.url ?? "/"),
    express: () => (req, res, next) => {
      const url = req.originalUrl ?? req.url ?? "/";
      // Not a workflow route: the rest of the Express app answers it.
      if (!routeOf(new URL(url, base.origin).pathname).route) return next();
      toNode(fetchHandler, nodeInline, base, req, res, url).catch(next);
    },
    registerApp,
    ready: registration,
    definitions,
    urlOf,
  };
  return Object.assign((req: Request) => fetchHandler(req), parts);
}

/** The wire definition of a workflow served at url: the fields docs/protocol.md ("Controls") lists. */
export function definition(w: Workflow<any, any>, url: string): WorkflowDefinitionJSON {
  const d: WorkflowDefinitionJSON = { name: w.name, url, triggers: w.triggers.map((t) => ({ ...t })) };
  if (w.retries !== undefined) d.retries = w.retries;
  if (w.cancelOn !== undefined) d.cancelOn = w.cancelOn;
  for (const k of controlNames) {
    if (w[k] !== undefined) (d as unknown as Record<string, unknown>)[k] = w[k];
  }
  return d;
}

/** Reads one request header (lower-case name); null when absent. */
type HeaderGetter = (name: string) => string | null;
/** The inline runtime of one workflow: the delivery's headers (one, all) and raw body. */
type InlineRoute = (get: HeaderGetter, all: () => Headers, body: string | Buffer) => Promise<Outcome>;
interface Route {
  name: string;
  upstash: FetchHandler;
  inline: InlineRoute;
}
/** Answers an inline delivery on a Node response; false: not one (the Fetch path answers it). */
type NodeInline = (pathname: string, req: IncomingMessage, res: ServerResponse, body: Buffer) => Promise<boolean>;

/** The size of inline answer a delivery offers (Duraton-Inline: <max bytes>); 0: none. */
function inlineOffer(get: HeaderGetter): number {
  const v = get("duraton-inline");
  if (!v) return 0;
  const n = Number(v);
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/** The headers a handler sees (ctx.headers): @upstash/workflow's selection of the delivery's. */
function userHeaders(all: Headers): Headers {
  const out = new Headers();
  all.forEach((v, k) => {
    const l = k.toLowerCase();
    const keep =
      (l !== "upstash-region" &&
        !l.startsWith("upstash-workflow-") &&
        !l.startsWith("x-vercel-") &&
        !l.startsWith("x-forwarded-") &&
        !hiddenHeaders.has(l)) ||
      l === "upstash-label";
    if (keep) out.append(k, v);
  });
  return out;
}
const hiddenHeaders = new Set(["cf-connecting-ip", "cdn-loop", "cf-ew-via", "cf-ray", "render-proxy-ttl"]);

function nodeHeaders(req: IncomingMessage): Headers {
  const h = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(", ") : v);
  }
  return h;
}

function writeAnswer(res: ServerResponse, a: Answer): void {
  a.headers["content-length"] = String(Buffer.byteLength(a.body));
  res.writeHead(a.status, a.headers);
  res.end(a.body);
}

function json(status: number, v: unknown): Response {
  return new Response(JSON.stringify(v), { status, headers: { "content-type": "application/json" } });
}

/** A delivery carries the run's whole history, so the bound is generous (as the Go SDK's). */
const maxBody = 32 << 20;

async function toNode(h: FetchHandler, inline: NodeInline, base: URL, req: ExpressLikeRequest, res: ServerResponse, path: string): Promise<void> {
  try {
    const body = await readBody(req);
    if (await inline(new URL(path, base.origin).pathname, req, res, body)) return;
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
      if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : v);
    }
    const method = req.method ?? "GET";
    const webReq = new Request(new URL(path, base.origin), {
      method,
      headers,
      body: method === "GET" || method === "HEAD" ? undefined : new Uint8Array(body),
    });
    const webRes = await h(webReq);
    const out = Buffer.from(await webRes.arrayBuffer());
    res.writeHead(webRes.status, headersObject(webRes.headers));
    res.end(out);
  } catch (err) {
    if (!res.headersSent) res.writeHead(err instanceof BodyError ? err.status : 500, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: err instanceof Error ? err.message : String(err) }));
  }
}

class BodyError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The raw body: from the stream, or as a body parser left it (a Buffer or a string only: a signature covers the raw bytes). */
async function readBody(req: ExpressLikeRequest): Promise<Buffer> {
  if (Buffer.isBuffer(req.body)) return req.body;
  if (typeof req.body === "string") return Buffer.from(req.body);
  if (req.body !== undefined && req.readableEnded) {
    throw new BodyError(500, "duraton: the request body was parsed before the workflow route: mount serve().express() before express.json(), or use express.raw({ type: \"*/*\" })");
  }
  // Events rather than an async iterator: a delivery's body is read on every step.
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    let over = false;
    req.on("data", (c: Buffer | string) => {
      if (over) return; // drained unread: the answer is the 413
      const b = Buffer.isBuffer(c) ? c : Buffer.from(c);
      n += b.length;
      if (n > maxBody) {
        over = true;
        chunks.length = 0;
        reject(new BodyError(413, `duraton: request body over ${maxBody} bytes`));
        return;
      }
      chunks.push(b);
    });
    req.once("end", () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, n)));
    req.once("error", reject);
  });
}

function headersObject(h: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  h.forEach((v, k) => {
    out[k] = v;
  });
  return out;
}

function decodeBase64(b64: string): string {
  return new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
}
