// End-to-end test of `npm start` itself: scripts/start.mjs as a child process, driven over HTTP
// like a user would. Slow (each instance runs `wrangler dev`), hence the generous timeouts.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import { startFaultServer } from "../../tools/fault-servers.js";
import { freePort, isPortOpen } from "../../tools/ports.mjs";

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
  "LIMITER_ADMIN_TOKEN",
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

/** Runs `node scripts/start.mjs` with `env` (stripped of the caller's own npm start variables). */
async function launch(env: Record<string, string>): Promise<Instance> {
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
  return instance;
}

const BANNER = /edge-limiter ready: worker (\S+) \| bridge (\S+)/;

/**
 * Polls until start.mjs has printed its ready banner (true) or exited on its own (false).
 * Throws (after stopping it) if neither happens in time.
 */
async function readyOrExited(instance: Instance): Promise<boolean> {
  const deadline = Date.now() + READY_MS;
  for (;;) {
    if (BANNER.test(instance.output())) return true;
    if (instance.child.exitCode !== null || instance.child.signalCode !== null) return false;
    if (Date.now() > deadline) {
      await instance.stop("SIGTERM");
      throw new Error(`npm start neither became ready nor exited:\n${instance.output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Runs `node scripts/start.mjs` with `env` and resolves once it prints its ready banner. */
async function startInstance(env: Record<string, string>): Promise<Instance> {
  const instance = await launch(env);
  if (!(await readyOrExited(instance))) {
    await instance.stop("SIGTERM");
    throw new Error(`npm start did not become ready:\n${instance.output()}`);
  }
  const banner = BANNER.exec(instance.output());
  instance.workerUrl = banner?.[1] ?? "";
  instance.bridgeUrl = banner?.[2]?.startsWith("http") ? banner[2] : undefined;
  return instance;
}

/** wrangler dev's request log lines (`[wrangler:info] GET /check 405 Method Not Allowed (9ms)`). */
function loggedRequests(output: string): { line: string; status: number }[] {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences
  const plain = output.replace(/\u001b\[[0-9;]*[A-Za-z]/g, "");
  return [...plain.matchAll(/^\[wrangler:info\] [A-Z]+ \S+ (\d{3})\b.*$/gm)].map((m) => ({
    line: m[0],
    status: Number(m[1]),
  }));
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
      // wrangler.toml's rules, with analytics on: the dashboard has counts to show.
      LIMITER_ANALYTICS: "1",
    });
    expect(instance.bridgeUrl).toBe(`http://127.0.0.1:${bridgePort}`);
    expect(instance.output()).toContain(
      `dashboard ${instance.workerUrl}/check/dashboard (any user, password LIMITER_ADMIN_TOKEN)`,
    );
    // No LIMITER_ADMIN_TOKEN in the environment: the development one, printed in the banner.
    expect(instance.output()).toContain("| LIMITER_ADMIN_TOKEN dev-admin-token |");
    const stats = await fetch(`${instance.workerUrl}/check/stats`, {
      headers: { Authorization: "Bearer dev-admin-token" },
    });
    expect(await stats.json()).toMatchObject({ enabled: true });
    // The decision token decides; it does not read the admin routes.
    const refused = await fetch(`${instance.workerUrl}/check/stats`, {
      headers: { Authorization: `Bearer ${LIMITER_TOKEN}` },
    });
    expect(refused.status).toBe(403);
    await refused.body?.cancel();

    const key = `${RUN}-own-bridge`;
    const first = await check(instance, key);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ allowed: true, source: "redis" });

    await stopAndCheck(instance, "SIGTERM");
  }, 120_000);

  it("a healthy start: the ready banner with a curl to try; its own readiness probe logged as a 2xx", async () => {
    const instance = await startInstance({
      BRIDGE_PORT: "0",
      REDIS_URL: inject("redisUrl"),
      LIMITER_ADMIN_TOKEN: "e2e-start-admin-token",
    });
    expect(instance.output()).toContain(`try: curl -s -X POST ${instance.workerUrl}/check`);
    // The environment's admin token, not the development one.
    expect(instance.output()).toContain("| LIMITER_ADMIN_TOKEN e2e-start-admin-token |");
    // Which Redis, and why that one.
    expect(instance.output()).toContain(`| redis ${inject("redisUrl")} (REDIS_URL) |`);
    expect(instance.output()).toContain(
      `dashboard ${instance.workerUrl}/check/dashboard (analytics off: LIMITER_ANALYTICS=1 npm start)`,
    );
    // Offline, wrangler's Request.cf warning and its getaddrinfo stack trace (twice a start)
    // are one line saying it is harmless.
    expect(instance.output()).not.toMatch(/getaddrinfo \w+ workers\.cloudflare\.com/);
    expect(instance.output().match(/cannot fetch Request\.cf/g)?.length ?? 0).toBeLessThanOrEqual(
      1,
    );
    // wrangler prints its request lines on its own time (a busy machine, later): wait for the
    // probe's, then stop, so every line it had to print is in the output.
    const deadline = Date.now() + READY_MS;
    while (loggedRequests(instance.output()).length === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await stopAndCheck(instance, "SIGTERM");
    // This test sent nothing itself: every request in the log is npm start's own.
    const requests = loggedRequests(instance.output());
    expect(requests.length, instance.output()).toBeGreaterThan(0);
    for (const request of requests) expect(request.status, request.line).toBeLessThan(400);
  }, 120_000);

  it("a store that refuses TIME in scripts: ready (its probe, a peek, follows the store's clock switch), decides from Redis exactly, peeks, one short clock line", async () => {
    // A REST endpoint in front of the test bridge whose scripts fail where they call TIME, as a
    // store that wants deterministic scripts answers (tools/fault-servers.ts).
    const faults = await startFaultServer();
    try {
      const scenario = `${faults.url}/refuse-time-start`;
      await fetch(`${faults.url}/__control/refuse-time-start`, {
        method: "POST",
        body: JSON.stringify({ mode: "refuse-time", target: inject("bridgeUrl") }),
      });
      const instance = await startInstance({
        UPSTASH_REDIS_REST_URL: scenario,
        UPSTASH_REDIS_REST_TOKEN: inject("bridgeToken"),
      });
      const first = await check(instance, `${RUN}-refuse-time`);
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({ allowed: true, source: "redis" });
      // Exact through it: a burst of 150 at limit 100 on a fresh key admits exactly 100.
      const burstKey = `${RUN}-refuse-time-burst`;
      const burst = await Promise.all(Array.from({ length: 150 }, () => check(instance, burstKey)));
      expect(burst.filter((r) => r.status === 200)).toHaveLength(100);
      expect(burst.filter((r) => r.status === 429)).toHaveLength(50);
      for (const r of burst) expect(["redis", "cache"]).toContain(r.body.source);
      // The peek (what the readiness probe asks) answers 200 and sees the burst's count.
      const peek = await fetch(`${instance.workerUrl}/check/peek`, {
        method: "POST",
        headers: { authorization: `Bearer ${LIMITER_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ key: burstKey, limit: 100, window: "1m" }),
      });
      expect(peek.status).toBe(200);
      expect(await peek.json()).toMatchObject({ allowed: false, remaining: 0 });
      // wrangler prints the worker's log lines after its own request lines, and a loaded machine
      // can be stopping it before then: wait (bounded) for the line before stopping.
      for (let i = 0; i < 100 && !instance.output().includes('"store-clock"'); i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      await stopAndCheck(instance, "SIGTERM");
      const stats = (await (await fetch(`${faults.url}/__stats/refuse-time-start`)).json()) as {
        refusedTime?: number;
      };
      // Refused once, by whichever script met it first; every later one passed the caller's clock.
      expect(stats.refusedTime).toBe(1);
      const lines = instance.output().split("\n");
      const clockLines = lines.filter((line) => line.includes('"store-clock"'));
      expect(clockLines, instance.output()).toHaveLength(1);
      // No line carries a script (the store's error quoted the whole EVAL, 26 KB, in one line).
      for (const line of lines) {
        expect(line.length, line.slice(0, 300)).toBeLessThanOrEqual(2_000);
        expect(line).not.toContain("redis.call(");
      }
    } finally {
      await faults.close();
    }
  }, 120_000);

  it("a store that refuses TIME, with wrangler.toml's own config (timeoutMs 500): ready, its peek a 200", async () => {
    const faults = await startFaultServer();
    try {
      await fetch(`${faults.url}/__control/refuse-time-toml`, {
        method: "POST",
        body: JSON.stringify({ mode: "refuse-time", target: inject("bridgeUrl") }),
      });
      // LIMITER_CONFIG empty: npm start leaves wrangler.toml's (what `npm start` alone runs).
      const instance = await startInstance({
        UPSTASH_REDIS_REST_URL: `${faults.url}/refuse-time-toml`,
        UPSTASH_REDIS_REST_TOKEN: inject("bridgeToken"),
        LIMITER_CONFIG: "",
      });
      // Only the probe ran: a peek, which writes nothing (wrangler.toml's prefix is shared).
      const peek = await fetch(`${instance.workerUrl}/check/peek`, {
        method: "POST",
        headers: { authorization: `Bearer ${LIMITER_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ key: `${RUN}-toml`, limit: 5, window: "1m" }),
      });
      expect(peek.status).toBe(200);
      expect(await peek.json()).toMatchObject({ allowed: true, remaining: 5 });
      await stopAndCheck(instance, "SIGTERM");
      const stats = (await (await fetch(`${faults.url}/__stats/refuse-time-toml`)).json()) as {
        refusedTime?: number;
      };
      expect(stats.refusedTime).toBe(1);
      // Every request the worker logged (the probe's, the peek's) was answered below 400.
      const requests = loggedRequests(instance.output());
      for (const request of requests) expect(request.status, request.line).toBeLessThan(400);
    } finally {
      await faults.close();
    }
  }, 120_000);

  it("a refused LIMITER_CONFIG: not ready, names the field and what to fix, no curl, stops", async () => {
    const cases = [
      {
        config: JSON.stringify({
          rules: [{ name: "x", match: { path: "/x" }, limit: 5, window: "5 parsecs" }],
          prefix: RUN,
        }),
        says: /LIMITER_CONFIG rules\[0\]\.window /,
      },
      // Only whitespace: blank, not "not set" (the variable is set).
      { config: "   ", says: /LIMITER_CONFIG is blank/ },
      // Shards refused as any other field is: a name twice, a reshard instant that does not parse.
      {
        config: JSON.stringify({ shards: ["", "B", "B"], rules: [], prefix: RUN }),
        says: /LIMITER_CONFIG shards must not name a shard twice/,
      },
      {
        config: JSON.stringify({
          shards: ["", "B"],
          reshard: { from: [""], at: "next tuesday" },
          rules: [],
          prefix: RUN,
        }),
        says: /LIMITER_CONFIG reshard\.at must be an ISO 8601 instant/,
      },
    ];
    const instances = await Promise.all(
      cases.map(({ config }) =>
        launch({ BRIDGE_PORT: "0", REDIS_URL: inject("redisUrl"), LIMITER_CONFIG: config }),
      ),
    );
    const ready = await Promise.all(instances.map((instance) => readyOrExited(instance)));
    for (const [i, instance] of instances.entries()) {
      const output = instance.output();
      expect(ready[i], output).toBe(false);
      expect(output).not.toMatch(/edge-limiter ready|try: curl/);
      expect(output).not.toContain("is not set");
      expect(output).toMatch(/edge-limiter NOT ready: /);
      expect(output).toMatch(cases[i]?.says as RegExp);
      // Where to fix it: the variable the user set, or wrangler.toml's when unset.
      expect(output).toMatch(/Fix LIMITER_CONFIG in your environment/);
      expect(instance.child.exitCode, output).toBe(1);
      // Everything it started is stopped (the exit code was the process's own: it exited).
      expect(await instance.stop()).toBe(1);
      expect(processesOnPort(instance.port)).toEqual([]);
      expect(await isPortOpen(instance.port)).toBe(false);
    }
  }, 120_000);

  it("shards whose bindings are missing: not ready, naming the binding and how to set it", async () => {
    const instance = await launch({
      BRIDGE_PORT: "0",
      REDIS_URL: inject("redisUrl"),
      LIMITER_CONFIG: JSON.stringify({ shards: ["", "B"], rules: [], prefix: RUN }),
    });
    const output = (await readyOrExited(instance)) ? "ready" : instance.output();
    expect(output).toMatch(/edge-limiter NOT ready: /);
    expect(output).toMatch(/UPSTASH_REDIS_REST_URL_B is not set: shard "B" has no store/);
    expect(output).toMatch(
      /Set UPSTASH_REDIS_REST_URL_B and UPSTASH_REDIS_REST_TOKEN_B in your environment/,
    );
    expect(await instance.stop()).toBe(1);
  }, 120_000);

  it("a wrong UPSTASH_REDIS_REST_TOKEN: NOT ready once, naming it unauthorized", async () => {
    const instance = await launch({
      UPSTASH_REDIS_REST_URL: inject("bridgeUrl"),
      UPSTASH_REDIS_REST_TOKEN: "not-the-bridge-token",
    });
    const output = (await readyOrExited(instance)) ? "ready" : instance.output();
    expect(output.match(/edge-limiter NOT ready/g), output).toHaveLength(1);
    expect(output).toMatch(/NOT ready: the worker's store refused its token \(unauthorized\)/);
    expect(output).toMatch(/UPSTASH_REDIS_REST_TOKEN/);
    expect(output).not.toMatch(/did not answer/);
    expect(output).not.toContain("not-the-bridge-token");
    expect(await instance.stop()).toBe(1);
  }, 120_000);

  it("stops everything it started on Ctrl-C (SIGINT)", async () => {
    const instance = await startInstance({ BRIDGE_PORT: "0", REDIS_URL: inject("redisUrl") });
    expect(await isPortOpen(instance.port)).toBe(true);
    expect(processesOnPort(instance.port).length).toBeGreaterThan(0);

    await stopAndCheck(instance, "SIGINT");
  }, 120_000);
});
