// The inline runtime's signature check (node:crypto): the Receiver's rules, plus a
// required expiry; either key verifies.

import { test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { verifySignature, SignatureError } from "../dist/verify.js";

const keys = { current: "sig_current", next: "sig_next" };
const b64u = (v) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");

function sign(key, claims, { alg = "HS256" } = {}) {
  const head = `${b64u({ alg, typ: "JWT" })}.${b64u(claims)}`;
  return `${head}.${crypto.createHmac("sha256", key).update(head).digest("base64url")}`;
}

const now = 1_800_000_000_000;
const claimsFor = (body, over = {}) => ({
  iss: "Upstash",
  sub: "http://127.0.0.1/w",
  jti: "jwt_1",
  body: crypto.createHash("sha256").update(body).digest("base64url"),
  iat: now / 1000,
  nbf: now / 1000 - 1,
  exp: now / 1000 + 300,
  ...over,
});

test("verify: a token of either key over the body verifies; its claims come back", () => {
  const body = '[{"body":"e30="}]';
  assert.equal(verifySignature(sign(keys.current, claimsFor(body)), body, keys, now).jti, "jwt_1");
  assert.equal(verifySignature(sign(keys.next, claimsFor(body)), Buffer.from(body), keys, now).sub, "http://127.0.0.1/w");
  // QStash pads the body hash: accepted.
  assert.ok(verifySignature(sign(keys.current, claimsFor(body, { body: claimsFor(body).body + "=" })), body, keys, now));
});

test("verify: what is refused, and why", () => {
  const body = "{}";
  const refused = (token, b = body, t = now) => assert.throws(() => verifySignature(token, b, keys, t), SignatureError);
  refused(undefined);
  refused("a.b");
  refused(sign("sig_other", claimsFor(body)));
  refused(sign(keys.current, claimsFor(body)), "{ }");
  refused(sign(keys.current, claimsFor(body, { iss: "other" })));
  refused(sign(keys.current, claimsFor(body, { exp: undefined })));
  refused(sign(keys.current, claimsFor(body)), body, now + 400_000);
  refused(sign(keys.current, claimsFor(body)), body, now - 60_000);
  refused(sign(keys.current, claimsFor(body), { alg: "none" }));
  const t = sign(keys.current, claimsFor(body));
  refused(t.slice(0, -2) + (t.endsWith("A") ? "B" : "A") + t.slice(-1));
});
