// Shared helpers for the @upstash/qstash compatibility tests.
//
// The tests run the official SDK, unmodified, against a real duraton process whose
// credentials arrive in QSTASH_URL, QSTASH_TOKEN, QSTASH_CURRENT_SIGNING_KEY and
// QSTASH_NEXT_SIGNING_KEY (cmd/duraton/compat_test.go sets them). Everything binds to
// 127.0.0.1 only.

import http from "node:http";
import crypto from "node:crypto";
import assert from "node:assert/strict";
import { Client, Receiver, QstashError } from "@upstash/qstash";

export { Client, Receiver, QstashError };

// QSTASH_DEV / QSTASH_REGION make the SDK ignore QSTASH_URL (dev mode would even try to
// download a binary), so they must never reach the SDK.
for (const v of ["QSTASH_DEV", "QSTASH_DEV_PORT", "QSTASH_REGION"]) delete process.env[v];

function requireEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through cmd/duraton/compat_test.go`);
  return v;
}

export const env = {
  url: requireEnv("QSTASH_URL").replace(/\/$/, ""),
  token: requireEnv("QSTASH_TOKEN"),
  currentSigningKey: requireEnv("QSTASH_CURRENT_SIGNING_KEY"),
  nextSigningKey: requireEnv("QSTASH_NEXT_SIGNING_KEY"),
};

/** The official client, pointed at duraton. */
export function newClient(overrides = {}) {
  return new Client({ baseUrl: env.url, token: env.token, ...overrides });
}

/** The official receiver, with duraton's signing keys. */
export function newReceiver() {
  return new Receiver({ currentSigningKey: env.currentSigningKey, nextSigningKey: env.nextSigningKey });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const tag = () => crypto.randomBytes(5).toString("hex");

/**
 * Polls fn until it returns a truthy value and returns that value. Errors thrown by fn count
 * as "not yet". Throws, naming `what` and the last error, once timeoutMs has passed.
 */
export async function waitFor(what, fn, { timeoutMs = 15000, intervalMs = 50 } = {}) {
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
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await sleep(intervalMs);
  }
}

/** Asserts that promise rejects with a QstashError of the given HTTP status. */
export async function rejectsWithStatus(promise, status, what) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof QstashError, `${what}: expected a QstashError, got ${e?.name}: ${e?.message}`);
    assert.equal(e.status, status, `${what}: HTTP status (message: ${e.message})`);
    return true;
  });
}

/** Parses a JSON error body `{"error": "..."}` and returns the error text. */
export function errorText(text, what) {
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    assert.fail(`${what}: error body is not JSON: ${JSON.stringify(text)}`);
  }
  assert.equal(typeof parsed.error, "string", `${what}: error body lacks a string "error": ${text}`);
  assert.ok(parsed.error.length > 0, `${what}: empty "error"`);
  return parsed.error;
}

/** Raw fetch against the duraton API (for what the SDK cannot express). */
export async function api(method, path, { headers = {}, body, token = env.token } = {}) {
  const h = { ...headers };
  if (token !== null) h.Authorization = `Bearer ${token}`;
  const res = await fetch(env.url + path, { method, headers: h, body });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text };
}

const header = (headers, name) => {
  const v = headers[name.toLowerCase()];
  return Array.isArray(v) ? v.join(", ") : v;
};

/**
 * A local endpoint that records every request it receives and verifies EVERY one with the
 * official Receiver, passing the delivery URL as `url` (so the JWT `sub` is checked too).
 *
 * respond(delivery) decides the answer: {status, body, headers, holdMs}; default 200 "ok".
 * It may be replaced at any time through `endpoint.respond = …`.
 */
export async function startEndpoint(t, respond = () => ({ status: 200, body: "ok" })) {
  const receiver = newReceiver();
  const deliveries = [];
  let inFlight = 0;
  const ep = {
    url: "",
    deliveries,
    respond,
    maxConcurrency: 0,
    /** Deliveries whose path (without query) is path. */
    at(path) {
      return deliveries.filter((d) => d.path === path);
    },
    /** Deliveries carrying Upstash-Message-Id = id. */
    forMessage(id) {
      return deliveries.filter((d) => d.messageId === id);
    },
    /** Asserts that every delivery so far passed Receiver.verify. */
    assertAllVerified() {
      for (const d of deliveries) {
        assert.equal(d.verifyError, null, `delivery ${d.method} ${d.url} (message ${d.messageId}) failed Receiver.verify: ${d.verifyError}`);
      }
    },
  };

  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      inFlight++;
      ep.maxConcurrency = Math.max(ep.maxConcurrency, inFlight);
      const body = Buffer.concat(chunks).toString("utf8");
      const u = new URL(req.url, ep.url);
      const d = {
        receivedAt: Date.now(),
        method: req.method,
        path: u.pathname,
        url: ep.url + req.url, // what QStash signs as `sub`: the exact destination URL
        headers: req.headers,
        header: (name) => header(req.headers, name),
        body,
        messageId: header(req.headers, "upstash-message-id"),
        signature: header(req.headers, "upstash-signature"),
        verifyError: "not verified yet",
      };
      try {
        if (!d.signature) throw new Error("no Upstash-Signature header");
        await receiver.verify({ signature: d.signature, body, url: d.url });
        d.verifyError = null;
      } catch (e) {
        d.verifyError = `${e?.name}: ${e?.message}`;
      }
      deliveries.push(d);
      let answer;
      try {
        answer = (await ep.respond(d)) ?? {};
      } catch (e) {
        answer = { status: 599, body: String(e) };
      }
      if (answer.holdMs) await sleep(answer.holdMs);
      inFlight--;
      res.writeHead(answer.status ?? 200, { "Content-Type": "text/plain", ...(answer.headers ?? {}) });
      res.end(answer.body ?? "");
    });
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  ep.url = `http://127.0.0.1:${server.address().port}`;
  t.after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  return ep;
}

/** Decodes a compact JWT without verifying it. */
export function decodeJwt(token) {
  const parts = String(token).split(".");
  assert.equal(parts.length, 3, "signature is not a compact JWT");
  const dec = (p) => JSON.parse(Buffer.from(p, "base64url").toString("utf8"));
  return { header: dec(parts[0]), payload: dec(parts[1]) };
}

/** Headers of a stored message, case-insensitively (messages.get answers a name → values map). */
export const headersOf = (m) => {
  const h = new Headers();
  for (const [k, v] of Object.entries(m.header ?? {})) for (const one of [].concat(v)) h.append(k, one);
  return h;
};
