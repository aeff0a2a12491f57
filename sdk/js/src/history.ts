// A delivery's history, read once: the JSON array Duraton (or QStash) sends, whose first
// entry is the run's initial payload and whose other entries are the recorded steps. Each
// entry's body is decoded once; nothing is serialised again (an answer carries only the
// new steps).

/** A recorded step object, as the SDKs write it. */
export interface RecordedStep {
  stepId: number;
  stepName: string;
  stepType: string;
  out?: unknown;
  concurrent: number;
  targetStep?: number;
  waitTimeout?: boolean;
  [field: string]: unknown;
}

export interface History {
  /** The initial payload as sent (a string; empty when there was none). */
  rawPayload: string;
  /** The steps, deduplicated as @upstash/workflow does, the initial one first (stepId 0). */
  steps: RecordedStep[];
  /** The last entry repeats an earlier one: the delivery has nothing to do. */
  lastIsDuplicate: boolean;
}

interface Entry {
  body?: unknown;
  callType?: unknown;
}

/** Reads a delivery's body; throws an Error naming what is wrong. */
export function parseHistory(body: string): History {
  let entries: unknown;
  try {
    entries = JSON.parse(body);
  } catch (err) {
    throw new Error(`workflow history is not JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(entries) || entries.length === 0) throw new Error("workflow history is not a non-empty array");
  const first = entries[0] as Entry;
  const rawPayload = typeof first?.body === "string" ? decodeBase64(first.body) : "";
  const steps: RecordedStep[] = [{ stepId: 0, stepName: "init", stepType: "Initial", out: rawPayload, concurrent: 1 }];
  for (let i = 1; i < entries.length; i++) {
    const e = entries[i] as Entry;
    if (e?.callType !== "step") continue;
    if (typeof e.body !== "string") throw new Error(`workflow history entry ${i} has no body`);
    let s: RecordedStep;
    try {
      s = JSON.parse(decodeBase64(e.body)) as RecordedStep;
    } catch (err) {
      throw new Error(`workflow history entry ${i}: ${(err as Error).message}`);
    }
    if (typeof s !== "object" || s === null || typeof s.stepId !== "number") throw new Error(`workflow history entry ${i} is not a step object`);
    steps.push(s);
  }
  return { rawPayload, steps: dedupe(steps), lastIsDuplicate: lastIsDuplicate(steps) };
}

/** Standard base64 to UTF-8 text (invalid sequences become U+FFFD, as TextDecoder does). */
export function decodeBase64(b64: string): string {
  return Buffer.from(b64, "base64").toString("utf8");
}

/** The first of each step id (and of each plan step's target), in order. */
function dedupe(steps: RecordedStep[]): RecordedStep[] {
  const targets = new Set<number>();
  const ids = new Set<number>();
  const out: RecordedStep[] = [];
  for (const s of steps) {
    if (s.stepId === 0) {
      const t = s.targetStep ?? 0;
      if (targets.has(t)) continue;
      targets.add(t);
    } else {
      if (ids.has(s.stepId)) continue;
      ids.add(s.stepId);
    }
    out.push(s);
  }
  return out;
}

function lastIsDuplicate(steps: RecordedStep[]): boolean {
  if (steps.length < 2) return false;
  const last = steps[steps.length - 1];
  for (let i = 0; i < steps.length - 1; i++) {
    if (steps[i].stepId === last.stepId && steps[i].targetStep === last.targetStep) return true;
  }
  return false;
}

/** The initial payload as @upstash/workflow's default parser gives it: JSON, else the text, undefined when empty. */
export function parsePayload(raw: string): unknown {
  if (!raw) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}
