import { describe, expect, inject, it } from "vitest";
import type { Env } from "../../src/env";
import { getRuntime } from "../../src/runtime";
import { uniquePrefix } from "./redis";

describe("getRuntime", () => {
  it("an isolate's env object is looked up, not serialized again, on every request", () => {
    const config = JSON.stringify({ prefix: uniquePrefix("runtime"), rules: [] });
    let reads = 0;
    const env: Env = {
      UPSTASH_REDIS_REST_URL: inject("bridgeUrl"),
      UPSTASH_REDIS_REST_TOKEN: inject("bridgeToken"),
      get LIMITER_CONFIG() {
        reads++;
        return config;
      },
    };
    const first = getRuntime(env);
    expect(first.ok).toBe(true);
    const afterBuild = reads;
    for (let i = 0; i < 10; i++) expect(getRuntime(env)).toBe(first);
    expect(reads).toBe(afterBuild);
    // Another env object with the same bindings (a binding-for-binding copy) shares the runtime.
    expect(
      getRuntime({
        UPSTASH_REDIS_REST_URL: env.UPSTASH_REDIS_REST_URL,
        UPSTASH_REDIS_REST_TOKEN: env.UPSTASH_REDIS_REST_TOKEN,
        LIMITER_CONFIG: config,
      }),
    ).toBe(first);
  });
});
