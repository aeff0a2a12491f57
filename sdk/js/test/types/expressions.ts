// Type-level tests of expressions, correlated waits and cancelOn (see controls.ts for how
// they run): the documented shapes compile, typos and wrong shapes do not.

import { workflow, type Context } from "@duraton/sdk";

const handler = async (ctx: Context) => {
  const r = await ctx.step.waitForEvent<{ orderId: string }>("paid", "order.paid", { timeout: "1d", match: "data.orderId", if: "async.data.amount > 100" });
  if (!r.timeout) r.data?.orderId.toUpperCase();
  // @ts-expect-error a typo in a wait option
  await ctx.step.waitForEvent("paid", "order.paid", { macth: "data.orderId" });
};

workflow({ name: "ok.e1", singleton: { key: "event.data.orderId", mode: "skip" }, handler });
workflow({ name: "ok.e2", priority: { run: "event.data.vip ? 600 : 0" }, handler });
workflow({ name: "ok.e3", cancelOn: [{ event: "order.cancelled", match: "data.orderId", if: "async.data.reason != \"test\"", timeoutMs: 86_400_000 }], handler });

// @ts-expect-error priority takes shiftMs or run, not both
workflow({ name: "bad.e1", priority: { shiftMs: 1000, run: "1" }, handler });
// @ts-expect-error a cancelOn entry needs its event
workflow({ name: "bad.e2", cancelOn: [{ match: "data.orderId" }], handler });
// @ts-expect-error a typo in a cancelOn entry
workflow({ name: "bad.e3", cancelOn: [{ event: "x", mach: "data.orderId" }], handler });
