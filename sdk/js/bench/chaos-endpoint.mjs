// Workflow child of `duraton bench chaos --endpoint=ts-native`: the chaos bench's
// workflow (three steps around a one-second sleep) served by this package's serve() (the
// built dist/) on a node:http server bound to 127.0.0.1. The bench's chaos proxy sits in
// front of it: BASE_URL is the proxy's, which is where Duraton delivers and where steps
// are published to.
//
// Line protocol (cmd/duraton/benchproc.go):
//   stdout "ready http://127.0.0.1:PORT"  once, when listening (the workflow is at /wf)
//   stdout "exec"                         each time a step function runs
//   stdout "done <run id>"                each time a run's handler runs to its end
//   stdin  "stats"  →  stdout "stats {"cpu_us":…}"
// It exits when stdin closes.
//
// Usage: node bench/chaos-endpoint.mjs BASE_URL   (QSTASH_URL, QSTASH_TOKEN and both signing keys in env)

import http from "node:http";
import readline from "node:readline";
import { serve, workflow } from "../dist/index.js";

for (const v of ["QSTASH_DEV", "QSTASH_DEV_PORT", "QSTASH_REGION", "UPSTASH_WORKFLOW_URL", "DURATON_URL", "DURATON_TOKEN"]) delete process.env[v];
const need = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run through duraton bench chaos --endpoint=ts-native)`);
  return v;
};
const baseUrl = process.argv[2];
if (!baseUrl) throw new Error("usage: chaos-endpoint.mjs BASE_URL");

const step = (ctx, name) =>
  ctx.step.run(name, () => {
    process.stdout.write("exec\n");
    return `${name} done`;
  });
const wf = workflow({
  name: "wf",
  handler: async (ctx) => {
    await step(ctx, "first");
    await ctx.step.sleep("nap", 1);
    await step(ctx, "second");
    await step(ctx, "third");
    process.stdout.write(`done ${ctx.runId}\n`);
    return "ok";
  },
});

const served = serve({
  app: "chaos",
  workflows: [wf],
  baseUrl,
  registerOnStart: false,
  env: {
    QSTASH_URL: need("QSTASH_URL"),
    QSTASH_TOKEN: need("QSTASH_TOKEN"),
    QSTASH_CURRENT_SIGNING_KEY: need("QSTASH_CURRENT_SIGNING_KEY"),
    QSTASH_NEXT_SIGNING_KEY: need("QSTASH_NEXT_SIGNING_KEY"),
  },
});
const server = http.createServer(served.node);
server.keepAliveTimeout = 60_000;
await new Promise((resolve, reject) => {
  server.once("error", reject);
  server.listen(0, "127.0.0.1", resolve);
});
process.stdout.write(`ready http://127.0.0.1:${server.address().port}\n`);

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  if (line !== "stats") {
    process.stderr.write(`unknown command ${JSON.stringify(line)}\n`);
    process.exit(2);
  }
  const cpu = process.cpuUsage();
  process.stdout.write(`stats ${JSON.stringify({ cpu_us: cpu.user + cpu.system })}\n`);
});
rl.on("close", () => {
  server.closeAllConnections?.();
  server.close(() => process.exit(0));
});
