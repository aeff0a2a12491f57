// Verifies a delivery's Upstash-Signature with node:crypto: one HMAC per key tried and one
// SHA-256 of the body, no JWT library. The rules are the official Receiver's (HS256,
// issuer "Upstash", the body's hash) plus a required expiry, as the Go SDK's.

import { createHash, createHmac, timingSafeEqual } from "node:crypto";

/** The signing keys a delivery may be signed with: current first, then next. */
export interface SigningKeys {
  current: string;
  next: string;
}

/** What the verified token says (the claims the runtime reads). */
export interface VerifiedClaims {
  sub?: string;
  jti?: string;
  exp: number;
}

/** A signature that does not verify. */
export class SignatureError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SignatureError";
  }
}

/** Seconds of clock difference accepted on exp and nbf. */
const leewaySeconds = 30;
/** A token longer than this is refused unread. */
const maxTokenBytes = 8 << 10;

/** Checks token against body with either key at time now (Unix ms); throws a SignatureError. */
export function verifySignature(token: string | null | undefined, body: Buffer | string, keys: SigningKeys, now = Date.now()): VerifiedClaims {
  if (!token) throw new SignatureError("signature missing");
  if (token.length > maxTokenBytes) throw new SignatureError("signature too large");
  const dot1 = token.indexOf(".");
  const dot2 = token.indexOf(".", dot1 + 1);
  if (dot1 <= 0 || dot2 <= dot1 || token.indexOf(".", dot2 + 1) !== -1) throw new SignatureError("signature is not a JWT");
  const header = token.slice(0, dot1);
  if (header !== hs256Header && parseSegment<{ alg?: string }>(header).alg !== "HS256") throw new SignatureError("signature algorithm is not HS256");
  const signed = token.slice(0, dot2);
  const mac = Buffer.from(token.slice(dot2 + 1), "base64url");
  if (!macMatches(keys.current, signed, mac) && !macMatches(keys.next, signed, mac)) throw new SignatureError("signature invalid");
  const claims = parseSegment<{ iss?: unknown; sub?: unknown; jti?: unknown; body?: unknown; exp?: unknown; nbf?: unknown }>(token.slice(dot1 + 1, dot2));
  if (claims.iss !== "Upstash") throw new SignatureError(`signature issuer is ${JSON.stringify(claims.iss)}, not "Upstash"`);
  const secs = now / 1000;
  if (typeof claims.exp !== "number") throw new SignatureError("signature has no expiry");
  if (secs > claims.exp + leewaySeconds) throw new SignatureError("signature expired");
  if (typeof claims.nbf === "number" && secs < claims.nbf - leewaySeconds) throw new SignatureError("signature not yet valid");
  const want = createHash("sha256").update(body).digest("base64url");
  if (typeof claims.body !== "string" || claims.body.replace(/=+$/, "") !== want) throw new SignatureError("body does not match the signature");
  return {
    sub: typeof claims.sub === "string" ? claims.sub : undefined,
    jti: typeof claims.jti === "string" ? claims.jti : undefined,
    exp: claims.exp,
  };
}

/** base64url({"alg":"HS256","typ":"JWT"}): what Duraton and QStash send, compared without decoding. */
const hs256Header = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9";

function macMatches(key: string, signed: string, mac: Buffer): boolean {
  if (!key) return false;
  const want = createHmac("sha256", key).update(signed).digest();
  return want.length === mac.length && timingSafeEqual(want, mac);
}

function parseSegment<T>(seg: string): T {
  try {
    const v = JSON.parse(Buffer.from(seg, "base64url").toString("utf8")) as unknown;
    if (typeof v === "object" && v !== null) return v as T;
  } catch {
    /* reported below */
  }
  throw new SignatureError("signature is not a JWT");
}
