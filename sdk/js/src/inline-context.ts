// ctx for a delivery the inline runtime answers: the same Context as on
// @upstash/workflow's (workflow.ts makeContext), its steps mapped onto the runtime's.

import { WorkflowNonRetryableError, type WorkflowContext } from "@upstash/workflow";
import { budgetErrorFrom } from "./errors.js";
import { CallLazy, InvokeLazy, RunLazy, SleepLazy, SleepUntilLazy, WaitLazy, type InlineSteps } from "./inline.js";
import { sendEvents, type EventSender } from "./sendevent.js";
import { flowControlHeaders, flowControlOf } from "./stepflow.js";
import { eventsOf, waitCondition, type CallResult, type Context, type Steps, type Workflow } from "./workflow.js";

/** The delivery's headers a handler sees (ctx.headers), made when first read. */
export type HeaderSource = () => Headers;

export function makeInlineContext(
  s: InlineSteps,
  wf: Workflow,
  app: string,
  siblingURL: (name: string) => string,
  headers: HeaderSource,
  header: (name: string) => string | undefined,
  onLeave: () => void,
  client: EventSender | undefined,
): Context {
  const { event, events } = eventsOf(s.payload, s.createdAt);
  const step: Steps = {
    // With flowControl: a bad config throws here, before the step, as on @upstash/workflow (stepflow.ts runUnder).
    run: (name, fn, opts) => s.add(new RunLazy(name, () => fn(), opts?.flowControl ? flowControlHeaders(opts.flowControl) : undefined)) as Promise<never>,
    sendEvent: (name, evs) => s.add(new RunLazy(name, sendEvents(client, s.runId, name, evs))) as Promise<never>,
    sleep: async (name, d) => {
      await s.add(new SleepLazy(name, d));
    },
    sleepUntil: async (name, when) => {
      let time: number;
      if (typeof when === "number") time = when;
      else time = Math.round((typeof when === "string" ? new Date(when) : when).getTime() / 1000);
      await s.add(new SleepUntilLazy(name, time));
    },
    async waitForEvent(name, ev, opts = {}) {
      const timeout = opts.timeout ?? "7d";
      const cond = waitCondition(opts.match, opts.if);
      const r = (await s.add(new WaitLazy(name, ev, typeof timeout === "string" ? timeout : `${timeout}s`, cond))) as { timeout: boolean; eventData: unknown };
      return { timeout: r.timeout, data: r.timeout ? undefined : (r.eventData as never) };
    },
    invoke(name, opts) {
      let target: string;
      try {
        target = typeof opts.workflow === "string" ? opts.workflow : siblingURL(opts.workflow.name);
      } catch (err) {
        // Failed as a step, as on @upstash/workflow (see workflow.ts invoke).
        const msg = err instanceof Error ? err.message : String(err);
        return s.add(
          new RunLazy(name, () => {
            throw new WorkflowNonRetryableError(msg);
          }),
        ) as Promise<never>;
      }
      return s.add(new InvokeLazy(name, target, { body: opts.body, headers: opts.headers, retries: opts.retries })) as Promise<never>;
    },
    call: (name) => s.add(new CallLazy(name)) as Promise<never>,
    async ai(name, opts) {
      const token = opts.token ?? (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.OPENAI_API_KEY;
      if (!token) throw new Error(`duraton: ai step ${name}: no token (pass { token } or set OPENAI_API_KEY)`);
      const r = (await s.add(new CallLazy(name))) as CallResult;
      const budget = budgetErrorFrom(r.status, r.body);
      if (budget) throw budget;
      return r as never;
    },
  };
  let hs: Headers | undefined;
  return {
    event,
    events,
    runId: s.runId,
    workflow: header("duraton-workflow") ?? wf.name,
    app: header("duraton-app") ?? app,
    get headers() {
      return (hs ??= headers());
    },
    flowControl: flowControlOf(header),
    step,
    get upstash(): WorkflowContext<unknown> {
      onLeave();
      return s.leave();
    },
  };
}
