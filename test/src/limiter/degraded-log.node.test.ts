import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Hono, type MiddlewareHandler } from "hono";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { bundleSource } from "../../../tools/measure-env.mjs";

// A Hono app on Node whose Upstash token is wrong, against the real bridge: the store refuses
// every call, the local fallback decides, and the app must say so (a newcomer otherwise believes
// Redis enforces the limit). The limiter's clock is a manual one: cool-downs pass without sleeps.
const COOLDOWN = 1_000;

// src/ as the package ships it (tsconfig.node.json cannot follow src/'s extensionless imports).
let lib: { rateLimit: (options: Record<string, unknown>) => MiddlewareHandler };
const dir = mkdtempSync(join(tmpdir(), "edge-limiter-degraded-log-"));
beforeAll(async () => {
  lib = await bundleSource(`export * from "./src/index";`, dir);
}, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function clock(start = 1_700_000_000_000) {
  let t = start;
  return {
    now: () => t,
    advance: (ms: number) => {
      t += ms;
    },
  };
}

interface Logged {
  at: number;
  line: Record<string, unknown>;
}

/** Every JSON line the app writes to the console, with the (manual) time it was written. */
function captureLines(now: () => number): Logged[] {
  const lines: Logged[] = [];
  for (const level of ["log", "warn", "error"] as const) {
    vi.spyOn(console, level).mockImplementation((text: unknown) => {
      try {
        lines.push({ at: now(), line: JSON.parse(String(text)) });
      } catch {
        lines.push({ at: now(), line: { text: String(text) } });
      }
    });
  }
  return lines;
}

/**
 * The app, its limiter on the manual clock with these options besides. A long deadline: the
 * bridge refuses the token at once, and a busy machine must not turn that into a timeout.
 */
function app(
  time: ReturnType<typeof clock>,
  limiterOptions: Record<string, unknown> = {},
  client = "degraded-log-client",
) {
  const hono = new Hono();
  hono.use(
    "/api/*",
    lib.rateLimit({
      rules: { name: "api", limit: 3, window: "1m" },
      store: { url: inject("bridgeUrl"), token: "not-the-token" },
      key: () => client,
      limiterOptions: { now: time.now, timeoutMs: 10_000, ...limiterOptions },
    }),
  );
  hono.get("/api/x", (c) => c.text("ok"));
  return hono;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("a wrong token on Node", () => {
  it("logs a line naming unauthorized and the fallback at the first request", async () => {
    const time = clock();
    const lines = captureLines(time.now);
    const res = await app(time).request("/api/x");
    expect(res.status).toBe(200);
    expect(lines).toHaveLength(1);
    expect(lines[0]?.line).toMatchObject({
      event: "rate-limit-store-error",
      cause: "unauthorized",
      meanwhile: "fallback",
      store: new URL(inject("bridgeUrl")).host,
    });
    expect(String(lines[0]?.line.detail)).toMatch(/UPSTASH_REDIS_REST_TOKEN/);
    // The fallback decided it, as the line says.
    expect(res.headers.get("RateLimit")).not.toBeNull();
  });

  it("then at most one line a cool-down, however many requests", async () => {
    const time = clock();
    const lines = captureLines(time.now);
    const hono = app(time);
    // 40 s of a dead store, a request every 50 ms: 800 requests.
    for (let i = 0; i < 800; i++) {
      await hono.request("/api/x");
      time.advance(50);
    }
    expect(lines[0]?.line).toMatchObject({ cause: "unauthorized", meanwhile: "fallback" });
    // The breaker's opening, then one line per failed probe: each names the cause.
    expect(lines[1]?.line).toMatchObject({
      event: "circuit-breaker",
      to: "open",
      cause: "unauthorized",
      meanwhile: "fallback",
    });
    for (let i = 2; i < lines.length; i++) {
      expect((lines[i]?.at ?? 0) - (lines[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(COOLDOWN);
      expect(lines[i]?.line).toMatchObject({ cause: "unauthorized" });
    }
    // The cool-down doubles per failed probe (1, 2, 4, 8, 16 s…): a handful of lines, not 800.
    expect(lines.length).toBeGreaterThanOrEqual(3);
    expect(lines.length).toBeLessThanOrEqual(2 + 40_000 / COOLDOWN);
  });

  it("log: false silences it", async () => {
    const time = clock();
    const lines = captureLines(time.now);
    const hono = app(time, { log: false });
    for (let i = 0; i < 50; i++) {
      expect((await hono.request("/api/x")).status).toBeLessThan(500);
      time.advance(100);
    }
    expect(lines).toEqual([]);
  });

  it("a hook given replaces the default for its kind", async () => {
    const time = clock();
    const lines = captureLines(time.now);
    const errors: unknown[] = [];
    const hono = app(
      time,
      { onStoreError: (error: unknown) => errors.push(error) },
      "degraded-log-hook",
    );
    for (let i = 0; i < 3; i++) await hono.request("/api/x");
    expect(errors).toHaveLength(3);
    // The breaker's line is still the default's.
    expect(lines.map((logged) => logged.line.event)).toEqual(["circuit-breaker"]);
  });

  it("log: true keeps the default lines beside hooks of your own", async () => {
    const time = clock();
    const lines = captureLines(time.now);
    const seen: string[] = [];
    const hono = app(
      time,
      {
        log: true,
        onStoreError: () => seen.push("error"),
        onBreakerChange: (event: { to: string }) => seen.push(event.to),
      },
      "degraded-log-both",
    );
    for (let i = 0; i < 3; i++) await hono.request("/api/x");
    expect(seen).toEqual(["error", "error", "open", "error"]);
    expect(lines.map((logged) => logged.line.event)).toEqual([
      "rate-limit-store-error",
      "circuit-breaker",
    ]);
  });
});
