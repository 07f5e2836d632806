// `cp .dev.vars.example .dev.vars && npx wrangler dev`, as the README says, against a bridge:
// the worker answers /check with the example's LIMITER_TOKEN and proxies to ORIGIN_URL. The
// example is handed to wrangler with --env-file (never written over a .dev.vars of the
// developer's), its store pointed at this run's bridge; every other line is the example's.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startOrigin } from "../../tools/origin-server.mjs";
import { freePort } from "../../tools/ports.mjs";
import { spawnGroup, stopGroup } from "../../tools/process-group.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const EXAMPLE = readFileSync(path.join(ROOT, ".dev.vars.example"), "utf8");
const READY_MS = 90_000;

/** The example's bindings that are set (not commented out). */
function bindings(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split("\n")
      .filter((line) => /^[A-Z][A-Z0-9_]*=/.test(line))
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
}

const dir = mkdtempSync(path.join(tmpdir(), "edge-limiter-wrangler-dev-"));
let wrangler: ReturnType<typeof spawnGroup> | undefined;
let origin: Awaited<ReturnType<typeof startOrigin>> | undefined;
let workerUrl = "";
let output = "";

beforeAll(async () => {
  origin = await startOrigin();
  const envFile = path.join(dir, ".dev.vars");
  writeFileSync(
    envFile,
    `${EXAMPLE.replace(
      /^UPSTASH_REDIS_REST_URL=.*$/m,
      `UPSTASH_REDIS_REST_URL=${inject("bridgeUrl")}`,
    )
      .replace(
        /^UPSTASH_REDIS_REST_TOKEN=.*$/m,
        `UPSTASH_REDIS_REST_TOKEN=${inject("bridgeToken")}`,
      )
      .replace(/^# ORIGIN_URL=.*$/m, `ORIGIN_URL=${origin.url}`)}\n`,
  );
  const port = await freePort();
  wrangler = spawnGroup(
    path.join(ROOT, "node_modules", ".bin", "wrangler"),
    [
      "dev",
      "--ip",
      "127.0.0.1",
      "--port",
      String(port),
      "--inspector-port",
      String(await freePort()),
      "--persist-to",
      path.join(dir, "state"),
      "--env-file",
      envFile,
      "--show-interactive-dev-session=false",
    ],
    {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" },
    },
  );
  for (const stream of [wrangler.stdout, wrangler.stderr]) {
    stream?.on("data", (chunk) => {
      output += chunk;
    });
  }
  const deadline = Date.now() + READY_MS;
  while (!/Ready on http/.test(output)) {
    if (wrangler.exitCode !== null || Date.now() > deadline) {
      throw new Error(`wrangler dev did not start:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  workerUrl = `http://127.0.0.1:${port}`;
  // "Ready on" can precede the first accepted connection by a moment on a loaded machine.
  for (;;) {
    const answered = await fetch(`${workerUrl}/ready-probe`).then(
      async (res) => {
        await res.body?.cancel();
        return true;
      },
      () => false,
    );
    if (answered) break;
    if (Date.now() > deadline) throw new Error(`wrangler dev never answered:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}, READY_MS + 10_000);

afterAll(async () => {
  if (wrangler) await stopGroup(wrangler, { graceMs: 5000 });
  await origin?.close();
  rmSync(dir, { recursive: true, force: true });
}, 30_000);

describe(".dev.vars.example under wrangler dev", () => {
  const example = bindings(EXAMPLE);

  it("fits `npm run bridge`'s defaults and sets every secret the worker reads", () => {
    expect(example).toMatchObject({
      UPSTASH_REDIS_REST_URL: "http://127.0.0.1:8079",
      UPSTASH_REDIS_REST_TOKEN: "dev-bridge-token",
    });
    expect(Object.keys(example).sort()).toEqual([
      "LIMITER_ADMIN_TOKEN",
      "LIMITER_TOKEN",
      "UPSTASH_REDIS_REST_TOKEN",
      "UPSTASH_REDIS_REST_URL",
    ]);
    // Every binding of worker/env.ts is named in it, set or commented.
    const env = readFileSync(path.join(ROOT, "worker", "env.ts"), "utf8");
    for (const [, name] of env.matchAll(/^\s+([A-Z][A-Z0-9_]+)\?:/gm)) {
      expect(EXAMPLE, name).toMatch(new RegExp(`\\b${name}\\b`));
    }
  });

  it("answers /check from Redis with the example's LIMITER_TOKEN", async () => {
    const key = `wrangler-dev-${crypto.randomUUID()}`;
    const res = await fetch(`${workerUrl}/check`, {
      method: "POST",
      headers: {
        Authorization: `Bearer ${example.LIMITER_TOKEN}`,
        "Content-Type": "application/json",
      },
      body: JSON.stringify({ key, limit: 1, window: "1m" }),
    });
    expect(res.status, output).toBe(200);
    expect(await res.json()).toMatchObject({ allowed: true, source: "redis" });
  });

  it("proxies a request to ORIGIN_URL", async () => {
    const res = await fetch(`${workerUrl}/some/page`);
    expect(res.status, output).toBe(200);
    expect(await res.text()).toBe("origin /some/page");
  });
});
