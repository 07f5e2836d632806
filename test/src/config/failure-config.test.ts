import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/limiter-config";

describe("LIMITER_CONFIG failure-handling knobs", () => {
  it("defaults: cache 10000, fallback on at the full limit, breaker 3 / 1 s / 30 s, single flight", () => {
    const parsed = parseConfig({});
    expect(parsed.ok && parsed.value).toMatchObject({
      timeoutMs: 500,
      failMode: "open",
      denialCache: { maxEntries: 10_000 },
      fallback: { enabled: true, fraction: 1, maxKeys: 10_000, maxEntries: 100_000 },
      breaker: { failureThreshold: 3, cooldownMs: 1_000, maxCooldownMs: 30_000 },
      singleFlight: true,
    });
  });

  it("takes every knob", () => {
    const parsed = parseConfig(
      JSON.stringify({
        denialCache: { maxEntries: 0 },
        fallback: { enabled: false, fraction: 0.25 },
        breaker: { failureThreshold: 5, cooldownMs: 200, maxCooldownMs: 5_000 },
        singleFlight: false,
      }),
    );
    expect(parsed.ok && parsed.value).toMatchObject({
      denialCache: { maxEntries: 0 },
      fallback: { enabled: false, fraction: 0.25 },
      breaker: { failureThreshold: 5, cooldownMs: 200, maxCooldownMs: 5_000 },
      singleFlight: false,
    });
  });

  it.each([
    [{ fallback: { fraction: 0 } }, "fallback.fraction"],
    [{ fallback: { fraction: 1.5 } }, "fallback.fraction"],
    [{ breaker: { failureThreshold: 0 } }, "breaker.failureThreshold"],
    [{ breaker: { cooldown: 5 } }, "breaker.cooldown"],
    [{ denialCache: { maxEntries: -1 } }, "denialCache.maxEntries"],
    [{ singleFlight: "yes" }, "singleFlight"],
    // Arrays are not objects here either (valibot's object schemas would take [] as {}).
    [{ breaker: [] }, "breaker"],
    [{ fallback: [] }, "fallback"],
    [{ denialCache: [] }, "denialCache"],
  ])("rejects %j, naming %s", (config, field) => {
    expect(parseConfig(config)).toMatchObject({ ok: false, field });
  });
});
