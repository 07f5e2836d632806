import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/limiter-config";

describe("wrangler.toml's example LIMITER_CONFIG", () => {
  it("is valid", () => {
    const parsed = parseConfig((env as { LIMITER_CONFIG?: unknown }).LIMITER_CONFIG);
    expect(parsed.ok && parsed.value.rules.map((r) => r.name)).toEqual(["api", "login", "api-key"]);
  });
});
