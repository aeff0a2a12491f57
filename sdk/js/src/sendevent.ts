// ctx.step.sendEvent: events published as a recorded step (docs/protocol.md, "Native
// workflows"), as the Go SDK's sdk.SendEvent. The step's result is the events' ids, so a
// replay returns them without sending; an event without a dedupeId is sent with one made
// of the run, the step's id and the event's index (`step:<runId>:<stepId>:<i>`, the Go
// SDK's), so a step retried after a lost result sends nothing twice either (within the
// server's 24 h dedupe window, which answers the first send's id), whichever runtime
// (inline or @upstash/workflow) answers each delivery.

import type { WorkflowContext } from "@upstash/workflow";
import type { Client, SendEvent } from "./client.js";
import { executorOf } from "./stepflow.js";

/** What sendEvent needs of a client. */
export type EventSender = Pick<Client, "sendEvents">;

/** The function of a sendEvent step: sends the events as step stepId of runId; resolves with their ids. */
export function sendEvents(client: EventSender | undefined, runId: string, name: string, events: SendEvent | SendEvent[]): (stepId: number) => Promise<string[]> {
  const list = Array.isArray(events) ? events : [events];
  return async (stepId) => {
    if (!client) throw new Error(`duraton: sendEvent ${name}: no client (serve() passes one)`);
    if (list.length === 0) throw new Error(`duraton: sendEvent ${name}: no event`);
    const withIds = list.map((e, i) => ({ ...e, dedupeId: e.dedupeId ?? `step:${runId}:${stepId}:${i}` }));
    const res = await client.sendEvents(withIds);
    return res.map((r) => r.id);
  };
}

/** One sendEvent step on @upstash/workflow's context. */
export function sendEventStep(c: WorkflowContext<unknown>, client: EventSender | undefined, name: string, events: SendEvent | SendEvent[]): Promise<string[]> {
  // The id the step gets: the executor counts a step when it is added (synchronously,
  // also in a parallel group).
  const id = executorOf(c, `sendEvent ${name}`).stepCount + 1;
  const send = sendEvents(client, c.workflowRunId, name, events);
  return c.run(name, () => send(id)) as Promise<string[]>;
}
