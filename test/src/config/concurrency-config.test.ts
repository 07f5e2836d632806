/**
 * A concurrency rule in LIMITER_CONFIG (and the middleware's rules, the same schema): its
 * `limit` and `timeout`, what it refuses (a window, a cost but 1, a refund), each refusal
 * naming the field.
 */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/limiter-config";
import type { Validated } from "../../../src/config/validation";

const outcome = (parsed: Validated<unknown>) =>
  parsed.ok ? "accepted" : { field: parsed.field, detail: parsed.detail };
const one = (rule: Record<string, unknown>) =>
  parseConfig({ rules: [{ name: "exports", algorithm: "concurrency", limit: 5, ...rule }] });

describe("concurrency rules", () => {
  it("read the timeout as the policy's window in ms, 60 s by default", () => {
    const timed = one({ timeout: "30s" });
    expect(timed.ok && timed.value.rules[0]).toMatchObject({
      algorithm: "concurrency",
      limit: 5,
      windowMs: 30_000,
      cost: 1,
    });
    const plain = one({});
    expect(plain.ok && plain.value.rules[0]?.windowMs).toBe(60_000);
    expect(outcome(one({ timeout: "1d" }))).toBe("accepted");
    expect(outcome(one({ limit: 10_000 }))).toBe("accepted");
  });

  const refused: [string, Record<string, unknown>, string, RegExp][] = [
    ["a non-integer limit", { limit: 2.5 }, "rules[0].limit", /integer/],
    ["a limit past 10 000", { limit: 10_001 }, "rules[0].limit", /1 to 10000/],
    ["a timeout over a day", { timeout: "25h" }, "rules[0].timeout", /1 day/],
    ["a timeout of nothing", { timeout: 0 }, "rules[0].timeout", /duration/],
    ["a window", { window: "1m" }, "rules[0].window", /in flight/],
    ["a cost but 1", { cost: 2 }, "rules[0].cost", /one slot/],
    ["a refund on 5xx", { refundOn: "5xx" }, "rules[0].refundOn", /request ends/],
    ["a lease", { lease: true }, "rules[0].lease", /sliding log only/],
  ];
  for (const [what, rule, field, detail] of refused) {
    it(`refuse ${what}, naming ${field}`, () => {
      const parsed = outcome(one(rule));
      expect(parsed).toMatchObject({ field });
      expect((parsed as { detail: string }).detail).toMatch(detail);
    });
  }

  it("a rate rule still needs its window and takes no timeout", () => {
    const rate = (rule: Record<string, unknown>) =>
      outcome(parseConfig({ rules: [{ name: "api", limit: 5, ...rule }] }));
    expect(rate({})).toEqual({ field: "rules[0].window", detail: "is required" });
    expect(rate({ window: "1m", timeout: "30s" })).toMatchObject({ field: "rules[0].timeout" });
    expect(rate({ window: "1m" })).toBe("accepted");
  });
});
