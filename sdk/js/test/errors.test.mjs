// How failures map to BudgetError / WorkflowFailure: Duraton answers a budget stop with
// status 402 and {"error", "message", "code", "spent", "projected", "cap"}; the
// @upstash/workflow failure function sees only its message ("budget_exceeded: ...").

import { test } from "node:test";
import assert from "node:assert/strict";
import { WorkflowNonRetryableError } from "@upstash/workflow";
import { BudgetError, isBudgetError, budgetErrorFrom, WorkflowFailure } from "../dist/index.js";
import { failureError } from "../dist/workflow.js";

const usage = (tokens) => ({ inputTokens: tokens / 2, outputTokens: tokens / 2, tokens, cost: 0 });
const body = (code = "budget_exceeded") =>
  JSON.stringify({ error: `${code}: the call may add 60 tokens to 50 spent, over the cap 100`, message: `${code}: ...`, code, spent: usage(50), projected: usage(60), cap: { maxTokens: 100 } });

test("a 402 with code budget_exceeded is a BudgetError with its spend and cap", () => {
  const e = budgetErrorFrom(402, body());
  assert.ok(e instanceof BudgetError);
  assert.ok(e instanceof WorkflowNonRetryableError, "non-retryable: the run fails at once");
  assert.ok(isBudgetError(e));
  assert.equal(e.status, 402);
  assert.equal(e.code, "budget_exceeded");
  assert.match(e.message, /^budget_exceeded: the call may add 60 tokens/);
  assert.deepEqual(e.spent, usage(50));
  assert.deepEqual(e.projected, usage(60));
  assert.deepEqual(e.cap, { maxTokens: 100 });
  assert.equal(budgetErrorFrom(402, JSON.stringify(body())).code, "budget_exceeded", "a body encoded once more");
  assert.equal(budgetErrorFrom(402, { error: { code: "budget_exceeded", message: "over" } }).message, "over", "nested under error");
});

test("ai_price_unknown is a BudgetError too; anything else is not", () => {
  assert.equal(budgetErrorFrom(402, body("ai_price_unknown")).code, "ai_price_unknown");
  assert.equal(budgetErrorFrom(500, body()), undefined, "not a 402");
  assert.equal(budgetErrorFrom(402, JSON.stringify({ error: "payment required" })), undefined, "a 402 without the code");
  assert.equal(budgetErrorFrom(402, "budget_exceeded"), undefined, "not JSON");
  assert.equal(isBudgetError(new Error("budget_exceeded")), false);
  assert.equal(isBudgetError({ name: "BudgetError", code: "budget_exceeded" }), true, "a BudgetError of another copy of the package");
});

test("failureError: from the raw answer, else from the failure message, else a WorkflowFailure", () => {
  const fromRaw = failureError(402, "budget_exceeded: ...", body());
  assert.ok(fromRaw instanceof BudgetError);
  assert.deepEqual(fromRaw.cap, { maxTokens: 100 });
  const fromMessage = failureError(402, "budget_exceeded: the call may add 60 tokens");
  assert.ok(fromMessage instanceof BudgetError, "only the message (no raw answer)");
  assert.equal(fromMessage.code, "budget_exceeded");
  assert.equal(fromMessage.cap, undefined);
  const other = failureError(500, "boom", JSON.stringify({ message: "boom" }));
  assert.ok(other instanceof WorkflowFailure);
  assert.equal(other.status, 500);
  assert.equal(other.body, "boom");
  assert.ok(failureError(402, "payment required") instanceof WorkflowFailure, "a 402 of the endpoint is not a budget stop");
});
