// Request signing (verified by the official Receiver), API authentication and input
// validation.

import { test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import {
  Receiver,
  newClient,
  newReceiver,
  startEndpoint,
  waitFor,
  tag,
  decodeJwt,
  api,
  env,
  errorText,
  rejectsWithStatus,
} from "./lib.mjs";

const client = newClient();

test("deliveries are signed: Receiver accepts them and rejects tampering and wrong keys", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const dest = `${ep.url}/signed?q=1`;
  const body = JSON.stringify({ signed: tag() });
  const res = await client.publish({ url: dest, body, headers: { "Content-Type": "application/json" }, retries: 0 });
  const d = await waitFor("the delivery", () => ep.forMessage(res.messageId)[0]);
  ep.assertAllVerified();

  const receiver = newReceiver();
  assert.equal(await receiver.verify({ signature: d.signature, body: d.body, url: dest }), true);

  // The JWT itself: HS256, iss Upstash, sub = destination, body = base64url(sha256(body)).
  const { header, payload } = decodeJwt(d.signature);
  assert.equal(header.alg, "HS256");
  assert.equal(payload.iss, "Upstash");
  assert.equal(payload.sub, dest);
  assert.equal(payload.body.replace(/=+$/, ""), crypto.createHash("sha256").update(body).digest("base64url"));
  const now = Math.floor(Date.now() / 1000);
  assert.ok(payload.exp > now, "exp in the future");
  assert.ok(Math.abs(payload.iat - now) < 60, "iat is now");
  assert.ok(typeof payload.jti === "string" && payload.jti.length > 0, "jti present");

  await assert.rejects(
    receiver.verify({ signature: d.signature, body: body.replace("signed", "tampered"), url: dest }),
    /body hash/,
    "a tampered body must be rejected",
  );
  await assert.rejects(
    receiver.verify({ signature: d.signature, body, url: `${ep.url}/somewhere-else` }),
    /subject/,
    "a signature for another URL must be rejected",
  );
  const stranger = new Receiver({ currentSigningKey: `sig_${tag()}${tag()}`, nextSigningKey: `sig_${tag()}${tag()}` });
  await assert.rejects(stranger.verify({ signature: d.signature, body, url: dest }), "a wrong key must be rejected");
  if (env.currentSigningKey !== env.nextSigningKey) {
    // Deliveries are signed with the current key: a receiver knowing only the next one rejects.
    const nextOnly = new Receiver({ currentSigningKey: env.nextSigningKey, nextSigningKey: env.nextSigningKey });
    await assert.rejects(nextOnly.verify({ signature: d.signature, body, url: dest }), "signed with the current key");
  }
});

test("the API rejects a bad or missing token with 401 and a JSON error", { timeout: 30000 }, async () => {
  for (const [what, token] of [
    ["bad token", `wrong-${tag()}`],
    ["missing token", null],
  ]) {
    const r = await api("GET", "/v2/queues", { token });
    assert.equal(r.status, 401, `${what}: status (body ${r.text})`);
    errorText(r.text, what);
  }
  const r = await api("POST", "/v2/publish/http://127.0.0.1:1/x", { token: `wrong-${tag()}`, body: "x" });
  assert.equal(r.status, 401, `publish with a bad token: status (body ${r.text})`);
  errorText(r.text, "publish with a bad token");

  const bad = newClient({ token: `wrong-${tag()}` });
  await rejectsWithStatus(bad.publishJSON({ url: "http://127.0.0.1:1/x", body: {} }), 401, "SDK publish with a bad token");
});

test("bad input is refused with 400 and a JSON error naming the problem", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);

  // Neither a URL nor a URL group name (a name without "://" is a group, as in QStash).
  const notUrl = await api("POST", "/v2/publish/not%20a%20url", { body: "x" });
  assert.equal(notUrl.status, 400, `publish to "not a url": status (body ${notUrl.text})`);
  assert.match(errorText(notUrl.text, "publish to not a url"), /destination/);

  await rejectsWithStatus(client.publishJSON({ url: "ftp://example.com/x", body: {} }), 400, "SDK publishJSON to an ftp URL");
  await rejectsWithStatus(client.publishJSON({ url: "not-a-url", body: {} }), 404, "SDK publishJSON to a name that is no URL group");

  const banana = await api("POST", `/v2/publish/${ep.url}/delay`, { headers: { "Upstash-Delay": "banana" }, body: "x" });
  assert.equal(banana.status, 400, `Upstash-Delay: banana: status (body ${banana.text})`);
  const msg = errorText(banana.text, "Upstash-Delay: banana");
  assert.match(msg, /upstash-delay/i, "the error names the offending header");

  assert.equal(ep.deliveries.length, 0, "refused messages are not delivered");
});
