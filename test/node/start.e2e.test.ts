// End-to-end test of `npm start` itself: scripts/start.mjs as a child process, driven over HTTP
// like a user would. Slow (each instance runs `wrangler dev`), hence the generous timeouts.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import { freePort, isPortOpen } from "../../scripts/lib/ports.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const START = path.join(ROOT, "scripts", "start.mjs");
const READY_MS = 90_000;
const LIMITER_TOKEN = "e2e-start-limiter-token";
/** Unique per run: the Redis key prefix of every instance, and the part of every client key. */
const RUN = `e2e-start-${randomUUID()}`;
const CONFIG = JSON.stringify({ rules: [], timeoutMs: 10_000, failMode: "closed", prefix: RUN });

/** Environment variables npm start reads; stripped from the inherited environment. */
const START_VARS = [
  "PORT",
  "BRIDGE_PORT",
  "BRIDGE_TOKEN",
  "LIMITER_TOKEN",
  "LIMITER_CONFIG",
  "ORIGIN_URL",
  "UPSTASH_REDIS_REST_URL",
  "UPSTASH_REDIS_REST_TOKEN",
];

interface Instance {
  child: ChildProcess;
  port: number;
  workerUrl: string;
  bridgeUrl: string | undefined;
  output: () => string;
  /** Sends `signal` and resolves with the exit code once start.mjs has exited. */
  stop: (signal?: NodeJS.Signals) => Promise<number | null>;
}

const running = new Set<Instance>();

/** Runs `node scripts/start.mjs` with `env` and resolves once it prints its ready banner. */
async function startInstance(env: Record<string, string>): Promise<Instance> {
  const port = await freePort();
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !START_VARS.includes(key)),
  );
  const child = spawn(process.execPath, [START], {
    cwd: ROOT,
    env: { ...inherited, PORT: String(port), LIMITER_TOKEN, LIMITER_CONFIG: CONFIG, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk) => {
    output += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    output += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const instance: Instance = {
    child,
    port,
    workerUrl: "",
    bridgeUrl: undefined,
    output: () => output,
    stop: async (signal = "SIGTERM") => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      // Never SIGKILL first: start.mjs must get the chance to stop wrangler's process group.
      const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      const code = await exited;
      clearTimeout(timer);
      running.delete(instance);
      return code;
    },
  };
  running.add(instance);

  const deadline = Date.now() + READY_MS;
  for (;;) {
    const banner = /edge-limiter ready: worker (\S+) \| bridge (\S+)/.exec(output);
    if (banner?.[1]) {
      instance.workerUrl = banner[1];
      instance.bridgeUrl = banner[2]?.startsWith("http") ? banner[2] : undefined;
      return instance;
    }
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      await instance.stop("SIGTERM");
      throw new Error(`npm start did not become ready:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Processes whose command line names this port (wrangler's --port, workerd's socket address). */
function processesOnPort(port: number): string[] {
  const ps = execFileSync("ps", ["-eo", "pid,args"], { encoding: "utf8" });
  const pattern = new RegExp(`(--port[ =]|127\\.0\\.0\\.1:)${port}(\\D|$)`);
  return ps.split("\n").filter((line) => pattern.test(line));
}

/** Stops an instance and checks that nothing it started is left behind. */
async function stopAndCheck(instance: Instance, signal: NodeJS.Signals): Promise<void> {
  const code = await instance.stop(signal);
  expect(code, instance.output()).toBe(0);
  expect(processesOnPort(instance.port)).toEqual([]);
  expect(await isPortOpen(instance.port)).toBe(false);
  const bridgePort = instance.bridgeUrl ? Number(new URL(instance.bridgeUrl).port) : undefined;
  if (bridgePort !== undefined) expect(await isPortOpen(bridgePort)).toBe(false);
}

async function check(
  instance: Instance,
  key: string,
): Promise<{ status: number; body: { allowed: boolean; source?: string } }> {
  const res = await fetch(`${instance.workerUrl}/check`, {
    method: "POST",
    headers: { authorization: `Bearer ${LIMITER_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ key, limit: 100, window: "1m" }),
  });
  return { status: res.status, body: await res.json() };
}

afterAll(async () => {
  await Promise.all([...running].map((instance) => instance.stop("SIGTERM")));
  // Every key the worker wrote starts with this run's prefix.
  const redis = new Redis(inject("redisUrl"), { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `*${RUN}*`, "COUNT", 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
}, 60_000);

describe("npm start", () => {
  it("two instances on one REST endpoint admit exactly the limit across isolates", async () => {
    const shared = {
      UPSTASH_REDIS_REST_URL: inject("bridgeUrl"),
      UPSTASH_REDIS_REST_TOKEN: inject("bridgeToken"),
    };
    const instances = await Promise.all([startInstance(shared), startInstance(shared)]);
    for (const instance of instances) expect(instance.bridgeUrl).toBeUndefined();

    // Warm both isolates (config parse, client, script load) so the burst meets two hot ones.
    for (const instance of instances)
      expect((await check(instance, `${RUN}-warm`)).status).toBe(200);

    const key = `${RUN}-exact`;
    const results = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => check(instances[i % 2] as Instance, key)),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(100);
    expect(statuses.filter((s) => s === 429)).toHaveLength(900);
    // Every decision came from Redis (or a cached denial), none from a fallback path.
    const sources = new Set(results.map((r) => r.body.source));
    for (const source of sources) expect(["redis", "cache"]).toContain(source);
    // Each isolate got 500 requests: had they not shared one log, each would have admitted 100.

    await Promise.all(instances.map((instance) => stopAndCheck(instance, "SIGTERM")));
  }, 180_000);

  it("starts its own bridge when UPSTASH_REDIS_REST_URL/_TOKEN are not set", async () => {
    const bridgePort = await freePort();
    const instance = await startInstance({
      BRIDGE_PORT: String(bridgePort),
      BRIDGE_TOKEN: "e2e-start-bridge-token",
      REDIS_URL: inject("redisUrl"),
    });
    expect(instance.bridgeUrl).toBe(`http://127.0.0.1:${bridgePort}`);

    const key = `${RUN}-own-bridge`;
    const first = await check(instance, key);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ allowed: true, source: "redis" });

    await stopAndCheck(instance, "SIGTERM");
  }, 120_000);

  it("stops everything it started on Ctrl-C (SIGINT)", async () => {
    const instance = await startInstance({ BRIDGE_PORT: "0", REDIS_URL: inject("redisUrl") });
    expect(await isPortOpen(instance.port)).toBe(true);
    expect(processesOnPort(instance.port).length).toBeGreaterThan(0);

    await stopAndCheck(instance, "SIGINT");
  }, 120_000);
});
