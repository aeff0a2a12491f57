// The inline runtime: a delivery that offers inline answers (Duraton-Inline: <max bytes>)
// is answered with the step messages it would publish, or with the run's end, in its own
// response: one HTTP exchange per step instead of three (delivery, /v2/batch, answer), as
// the Go SDK does (docs/protocol.md, "Inline answers").
//
// A Run step's result is deferred: the handler goes on with it, as the next delivery
// would replay it, and the delivery ends at the handler's next step (answering the
// result) or at its end (answering the result and the run's end together). Going on
// before the result is recorded is safe: the code between steps runs again on every
// delivery anyway, and if the answer is lost the delivery comes again and the step runs
// again.
//
// The history and step messages are @upstash/workflow 1.3.3's, and step grouping
// (Promise.all) follows its executor, so a run can move between this runtime and
// @upstash/workflow's serve() at any delivery. What this runtime does not do itself it
// leaves to @upstash/workflow (`Fallback`): a new call or AI step, a call in a parallel
// group, or a handler that reads ctx.upstash. It gives up only before any new step ran in
// the delivery (or answers the deferred result first), so nothing runs twice because of it.

import { WorkflowNonRetryableError } from "@upstash/workflow";
import { attachStepName, failed, featureSet, finished, inlineAnswer, protocolVersion, type Answer, type Api } from "./answers.js";
import { parseHistory, parsePayload, type RecordedStep } from "./history.js";
import { DuratonApiError } from "./errors.js";
import { CallLazy, InvokeLazy, RunLazy, SleepLazy, SleepUntilLazy, WaitLazy, type Lazy } from "./lazy.js";
import { flowInGroup } from "./stepflow.js";
import { waitIfHeader } from "./workflow.js";

/** The delivery is for @upstash/workflow's serve(): this runtime leaves it untouched. */
export const Fallback = Symbol("duraton.fallback");
export type Outcome = Answer | typeof Fallback;

/** What the runtime reads of a delivery. */
export interface DeliveryInfo {
  runId: string;
  /** The workflow's URL (steps are published to it). */
  url: string;
  /** The largest inline answer the delivery accepts. */
  inlineMax: number;
  invokeCount: number;
  createdAt: number;
  api: Api;
}

/** The steps a handler calls, as the runtime offers them (workflow.ts maps ctx.step onto them). */
export interface InlineSteps {
  add(lazy: Lazy): Promise<unknown>;
  /** ctx.upstash was read: the rest of this delivery (and the workflow's next ones) go to @upstash/workflow. */
  leave(): never;
  readonly payload: unknown;
  readonly url: string;
  readonly runId: string;
  readonly createdAt: number;
}

const never = <T>(): Promise<T> => new Promise<T>(() => {});

/** Runs handler over the delivery's history; resolves with the answer, or Fallback. */
export async function runInline(d: DeliveryInfo, body: string, handler: (steps: InlineSteps) => Promise<unknown>): Promise<Outcome> {
  let history;
  try {
    history = parseHistory(body);
  } catch (err) {
    return failed(d.runId, err);
  }
  if (history.lastIsDuplicate) return finished(d.runId, "duplicate-step");
  return new Executor(d, history.steps, parsePayload(history.rawPayload)).run(handler);
}

type Group = Lazy[] & { result?: Promise<unknown> };

class Executor implements InlineSteps {
  private stepCount = 0;
  private planStepCount = 0;
  private readonly nonPlanStepCount: number;
  private active: Group | undefined;
  /** A Run step's result the handler went on with: its /v2/batch entry. */
  private deferred: string | undefined;
  private done = false;
  private settle!: (o: Outcome | Promise<Outcome>) => void;
  private readonly outcome = new Promise<Outcome>((r) => (this.settle = r));
  private executing: string | undefined;
  private entryHead: string | undefined;

  constructor(
    private readonly d: DeliveryInfo,
    private readonly steps: RecordedStep[],
    readonly payload: unknown,
  ) {
    this.nonPlanStepCount = steps.reduce((n, s) => (s.targetStep ? n : n + 1), 0);
  }

  get url() {
    return this.d.url;
  }
  get runId() {
    return this.d.runId;
  }
  get createdAt() {
    return this.d.createdAt;
  }

  run(handler: (steps: InlineSteps) => Promise<unknown>): Promise<Outcome> {
    let running: Promise<unknown>;
    try {
      running = handler(this);
    } catch (err) {
      running = Promise.reject(err); // a handler that is not async threw
    }
    running.then(
      (result) => {
        try {
          this.end(result);
        } catch (err) {
          this.fail(err); // a result JSON cannot encode (a BigInt, a cycle)
        }
      },
      (err) => this.fail(err),
    );
    return this.outcome;
  }

  /** Ends the delivery with o (the first call wins). */
  private stop(o: Outcome | Promise<Outcome>): void {
    if (this.done) return;
    this.done = true;
    this.settle(o);
  }

  leave(): never {
    if (this.deferred) this.flush();
    else this.stop(Fallback);
    throw new Error("duraton: this delivery continues on @upstash/workflow");
  }

  /** @upstash/workflow's addStep: steps added in the same tick form one parallel group. */
  async add(lazy: Lazy): Promise<unknown> {
    if (this.done) return never();
    if (this.executing) throw new Error(`A step can not be run inside another step. Tried to run '${lazy.name}' inside '${this.executing}'`);
    this.stepCount++;
    let group = this.active;
    if (!group) group = this.active = [] as Group;
    group.push(lazy);
    const index = group.length - 1;
    await Promise.resolve();
    await Promise.resolve();
    if (!group.result) {
      group.result = this.execute(group);
      this.active = undefined;
      this.planStepCount += group.length > 1 ? group.length : 0;
    }
    const result = await group.result;
    if (group.length === 1) return result;
    return (result as unknown[])[index];
  }

  private execute(group: Group): Promise<unknown> {
    if (this.done) return never();
    if (this.deferred) {
      // The step after a deferred result: the delivery ends with that result.
      this.flush();
      return never();
    }
    return group.length === 1 ? this.single(group[0]) : this.parallel(group);
  }

  private async single(lazy: Lazy): Promise<unknown> {
    const id = this.stepCount;
    // A step with its own flow control is planned first (its plan is recorded before its
    // result, and skipped when the history is read, as stepflow.ts has @upstash/workflow do).
    const plan = lazy instanceof RunLazy && lazy.flow ? this.steps.find((s) => s.stepId === 0 && s.targetStep === id) : undefined;
    if (plan) this.planStepCount++;
    if (this.stepCount < this.nonPlanStepCount) {
      const s = this.steps[this.stepCount + this.planStepCount];
      validate(lazy, s);
      return lazy.parse(s);
    }
    if (lazy instanceof RunLazy) {
      if (lazy.flow && plan !== this.steps[this.steps.length - 1]) {
        if (plan) {
          // Planned, and its delivery is another one: that delivery runs it (as the Go SDK).
          validate(lazy, plan);
          this.stop(finished(this.d.runId, "discard"));
        } else {
          this.submit([this.entry(JSON.stringify(lazy.flowPlan(id)), lazy.flow)]);
        }
        return never();
      }
      if (plan) validate(lazy, plan);
      const out = await this.call(lazy, id);
      this.deferred = this.entry(stepJSON(id, lazy.name, lazy.type, out, 1));
      return out === undefined ? undefined : JSON.parse(out);
    }
    if (lazy instanceof SleepLazy) {
      this.submit([this.entry(JSON.stringify({ stepId: id, stepName: lazy.name, stepType: lazy.type, sleepFor: lazy.sleepFor, concurrent: 1 }), lazy.delay())]);
    } else if (lazy instanceof SleepUntilLazy) {
      this.submit([this.entry(JSON.stringify({ stepId: id, stepName: lazy.name, stepType: lazy.type, sleepUntil: lazy.sleepUntil, concurrent: 1 }), lazy.notBefore())]);
    } else if (lazy instanceof WaitLazy) {
      this.stop(this.apiThen(() => this.wait(lazy, id)));
    } else if (lazy instanceof InvokeLazy) {
      this.stop(this.apiThen(() => this.invoke(lazy, id)));
    } else {
      this.stop(Fallback); // a call or an AI step: @upstash/workflow publishes it
    }
    return never();
  }

  /** @upstash/workflow's runParallel, answering inline. */
  private async parallel(group: Group): Promise<unknown> {
    const n = group.length;
    const initial = this.stepCount - (n - 1);
    const remaining = this.steps.filter((s) => (s.targetStep || s.stepId) >= initial);
    const state = remaining.length === 0 ? "first" : remaining.length >= 2 * n ? "last" : remaining[remaining.length - 1].targetStep ? "partial" : "discard";
    const sorted = [...this.steps].sort((a, b) => (a.targetStep || a.stepId) - (b.targetStep || b.stepId));
    const planned = sorted[initial + this.planStepCount]?.concurrent;
    const flowed = group.find((l) => l instanceof RunLazy && l.flow);
    if (flowed) throw flowInGroup(flowed.name);
    if (state !== "first" && planned !== n) {
      throw new Error(`Incompatible number of parallel steps when call state was '${state}'. Expected ${n}, got ${planned} from the request.`);
    }
    switch (state) {
      case "first": {
        const entries: string[] = [];
        for (let i = 0; i < n; i++) {
          const p = group[i].plan?.(n, initial + i);
          if (!p) {
            this.stop(Fallback);
            return never();
          }
          entries.push(this.entry(JSON.stringify(p.body), p.headers));
        }
        this.submit(entries);
        return never();
      }
      case "partial": {
        const plan = this.steps[this.steps.length - 1];
        const target = plan.targetStep!;
        const lazy = group[target - initial];
        if (!lazy) throw new Error(`duraton: plan step ${plan.stepName} targets step ${target}, outside the group`);
        validate(lazy, plan);
        let body: string;
        if (lazy instanceof RunLazy) body = stepJSON(target, lazy.name, lazy.type, await this.call(lazy, target), n);
        else if (lazy instanceof SleepLazy) body = JSON.stringify({ stepId: target, stepName: lazy.name, stepType: lazy.type, sleepFor: lazy.sleepFor, concurrent: n });
        else if (lazy instanceof SleepUntilLazy) body = JSON.stringify({ stepId: target, stepName: lazy.name, stepType: lazy.type, sleepUntil: lazy.sleepUntil, concurrent: n });
        else {
          this.stop(Fallback);
          return never();
        }
        this.submit([this.entry(body)]);
        return never();
      }
      case "discard":
        this.stop(finished(this.d.runId, "success"));
        return never();
      default: {
        const results = sorted.filter((s) => s.stepId >= initial).slice(0, n);
        results.forEach((s, i) => validate(group[i], s));
        return results.map((s, i) => group[i].parse(s));
      }
    }
  }

  /** Runs step id's function; its result as the JSON its out records (undefined: none). */
  private async call(lazy: RunLazy, id: number): Promise<string | undefined> {
    let v: unknown;
    try {
      this.executing = lazy.name;
      try {
        v = lazy.fn(id);
      } finally {
        this.executing = undefined;
      }
      if (v instanceof Promise) v = await v;
    } catch (err) {
      attachStepName(err, lazy.name);
      throw err;
    }
    return JSON.stringify(v) as string | undefined;
  }

  /** Ends the delivery with these /v2/batch entries: inline when they fit, else published. */
  private submit(entries: string[]): void {
    const batch = `[${entries.join(",")}]`;
    if (Buffer.byteLength(batch) <= this.d.inlineMax) {
      this.stop(inlineAnswer("steps", batch));
      return;
    }
    this.stop(this.apiThen(() => this.d.api.call("POST", "/v2/batch", { "content-type": "application/json" }, batch)));
  }

  private flush(): void {
    const entry = this.deferred!;
    this.deferred = undefined;
    this.submit([entry]);
  }

  /** An API call, then the delivery's usual answer (or the call's error). */
  private async apiThen(call: () => Promise<void>): Promise<Outcome> {
    try {
      await call();
      return finished(this.d.runId, "success");
    } catch (err) {
      return failed(this.d.runId, err);
    }
  }

  /** The handler returned: the run's end, inline when it fits (with the deferred result first). */
  private end(result: unknown): void {
    if (this.done) return;
    const json = (JSON.stringify(result) as string | undefined) ?? "";
    if (this.deferred) {
      const steps = `[${this.deferred}]`;
      const stepsBytes = Buffer.byteLength(steps);
      if (stepsBytes + Buffer.byteLength(json) <= this.d.inlineMax) {
        this.stop(inlineAnswer("end", steps + json, stepsBytes));
      } else {
        this.flush(); // the next delivery ends the run
      }
      return;
    }
    if (Buffer.byteLength(json) <= this.d.inlineMax) {
      this.stop(inlineAnswer("end", json));
      return;
    }
    this.stop(this.apiThen(() => this.d.api.call("DELETE", `/v2/workflows/runs/${encodeURIComponent(this.d.runId)}?cancel=false`, {}, json)));
  }

  /** The handler failed: a deferred result is answered first (the next delivery meets the failure). */
  private fail(err: unknown): void {
    if (this.done) return;
    if (this.deferred) {
      this.flush();
      return;
    }
    this.stop(failed(this.d.runId, err));
  }

  /** The headers of a step message to the workflow URL, in /v2/batch's lower case. */
  private stepHeaders(): Record<string, string> {
    const h: Record<string, string> = {
      "upstash-workflow-init": "false",
      "upstash-workflow-runid": this.d.runId,
      "upstash-workflow-url": this.d.url,
      "upstash-feature-set": featureSet,
      "upstash-workflow-sdk-version": protocolVersion,
      "upstash-forward-upstash-workflow-sdk-version": protocolVersion,
      "content-type": "application/json",
    };
    if (this.d.invokeCount > 0) h["upstash-forward-upstash-workflow-invoke-count"] = String(this.d.invokeCount);
    return h;
  }

  /** One /v2/batch entry to the workflow URL with the step object's JSON as its body. */
  private entry(stepBody: string, extra?: Record<string, string>): string {
    if (!extra) {
      this.entryHead ??= `{"destination":${JSON.stringify(this.d.url)},"headers":${JSON.stringify(this.stepHeaders())},"body":`;
      return `${this.entryHead}${JSON.stringify(stepBody)}}`;
    }
    return JSON.stringify({ destination: this.d.url, headers: { ...this.stepHeaders(), ...extra }, body: stepBody });
  }

  /** POST /v2/wait/{event}: the waiter, resumed with the event or at the timeout. */
  private async wait(lazy: WaitLazy, id: number): Promise<void> {
    const headers = this.stepHeaders();
    headers["upstash-workflow-calltype"] = "step";
    const timeoutHeaders: Record<string, string[]> = {};
    for (const [k, v] of Object.entries(headers)) timeoutHeaders[k] = [v];
    const body = JSON.stringify({
      url: this.d.url,
      timeout: lazy.timeout,
      timeoutUrl: this.d.url,
      timeoutHeaders,
      step: { stepId: id, stepType: lazy.type, stepName: lazy.name, concurrent: 1 },
    });
    // The condition rides on the wait's request only (not on the timeout's headers), as
    // on @upstash/workflow (workflow.ts withWaitCondition) and in the Go SDK.
    if (lazy.cond) headers[waitIfHeader.toLowerCase()] = lazy.cond;
    try {
      await this.d.api.call("POST", `/v2/wait/${encodeURIComponent(lazy.eventId)}`, headers, body);
    } catch (err) {
      // A 400 would read as "the run has ended" and leave it waiting for nothing: a
      // refused condition fails the run instead.
      if (err instanceof DuratonApiError && err.status === 400 && /invalid wait condition/.test(err.message)) throw new WorkflowNonRetryableError(err.message);
      throw err;
    }
  }

  /** POST /v2/publish/{child}: starts the child run, whose end resumes this one. */
  private invoke(lazy: InvokeLazy, id: number): Promise<void> {
    const child = `wfr_${randomId()}`;
    const resume: Record<string, string[]> = {};
    for (const [k, v] of Object.entries(this.stepHeaders())) resume[k] = [v];
    const envelope = JSON.stringify({
      body: lazy.opts.body === undefined ? undefined : typeof lazy.opts.body === "string" ? lazy.opts.body : JSON.stringify(lazy.opts.body),
      headers: resume,
      workflowRunId: this.d.runId,
      workflowRunCreatedAt: this.d.createdAt,
      workflowUrl: this.d.url,
      step: { stepId: id, stepName: lazy.name, stepType: lazy.type, concurrent: 1 },
    });
    const t = lazy.target;
    const h: Record<string, string> = {
      "upstash-workflow-init": "true",
      "upstash-workflow-runid": child,
      "upstash-workflow-url": t,
      "upstash-workflow-invoke": "true",
      "upstash-workflow-sdk-version": protocolVersion,
      "upstash-forward-upstash-workflow-sdk-version": protocolVersion,
      "upstash-forward-upstash-workflow-invoke-count": String(this.d.invokeCount + 1),
      "upstash-feature-set": featureSet,
      "upstash-failure-callback": t,
      "upstash-failure-callback-forward-upstash-workflow-is-failure": "true",
      "upstash-failure-callback-forward-upstash-workflow-failure-callback": "true",
      "upstash-failure-callback-workflow-runid": child,
      "upstash-failure-callback-workflow-init": "false",
      "upstash-failure-callback-workflow-url": t,
      "upstash-failure-callback-workflow-calltype": "failureCall",
      "upstash-failure-callback-feature-set": featureSet,
      "content-type": "application/json",
    };
    if (lazy.opts.retries !== undefined) {
      h["upstash-retries"] = String(lazy.opts.retries);
      h["upstash-failure-callback-retries"] = String(lazy.opts.retries);
    }
    for (const [k, v] of Object.entries(lazy.opts.headers ?? {})) {
      if (k.toLowerCase() === "content-type") h["content-type"] = v;
      else h[`upstash-forward-${k}`] = v;
    }
    return this.d.api.call("POST", `/v2/publish/${t}`, h, envelope);
  }
}

/** A step's JSON as @upstash/workflow writes a result: {stepId, stepName, stepType, out, concurrent}. */
function stepJSON(id: number, name: string, type: string, out: string | undefined, concurrent: number): string {
  return JSON.stringify({ stepId: id, stepName: name, stepType: type, out, concurrent });
}

function validate(lazy: Lazy, s: RecordedStep | undefined): void {
  if (!s) throw new Error(`duraton: no recorded step for ${lazy.name}`);
  if (lazy.name !== s.stepName) throw new Error(`Incompatible step name. Expected '${lazy.name}', got '${s.stepName}' from the request`);
  if (lazy.type !== s.stepType) throw new Error(`Incompatible step type. Expected '${lazy.type}', got '${s.stepType}' from the request`);
}

function randomId(): string {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Buffer.from(bytes).toString("base64url");
}

export { CallLazy, InvokeLazy, RunLazy, SleepLazy, SleepUntilLazy, WaitLazy };
