// ctx.step.sendEvent: events published as a recorded step (docs/protocol.md, "Native
// workflows"). The step's result is the events' ids, so a replay returns them without
// sending; an event without a dedupeId is sent with one made of the run, the step and
// its index, so a step retried after a lost result sends nothing twice either (within
// the server's 24 h dedupe window, which answers the first send's id).

import type { WorkflowContext } from "@upstash/workflow";
import type { Client, SendEvent } from "./client.js";

/** What sendEvent needs of a client. */
export type EventSender = Pick<Client, "sendEvents">;

/**
 * Runs one sendEvent step. `nth` counts the handler's sendEvent calls in this delivery
 * (the same on every replay), so two steps of the same name get different dedupeIds.
 */
export function sendEventStep(c: WorkflowContext<unknown>, client: EventSender | undefined, name: string, events: SendEvent | SendEvent[], nth: number): Promise<string[]> {
  const list = Array.isArray(events) ? events : [events];
  return c.run(name, async () => {
    if (!client) throw new Error(`duraton: sendEvent ${name}: no client (serve() passes one)`);
    if (list.length === 0) throw new Error(`duraton: sendEvent ${name}: no event`);
    const withIds = list.map((e, i) => ({ ...e, dedupeId: e.dedupeId ?? `step:${c.workflowRunId}:${nth}:${name}:${i}`.slice(0, 256) }));
    const res = await client.sendEvents(withIds);
    return res.map((r) => r.id);
  }) as Promise<string[]>;
}
