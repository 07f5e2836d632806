import { describe, expect, it } from "vitest";
import { parseConfig, parseRules } from "../../../src/config/limiter-config";
import type { Validated } from "../../../src/config/validation";

/**
 * What a failed parse names, the field as JSON (which escapes a lone surrogate: raw, one in an
 * assertion's diff cannot cross the test runner's socket, which wants UTF-8).
 */
function outcome(parsed: Validated<unknown>) {
  if (parsed.ok) return "ok";
  return {
    field: JSON.stringify(parsed.field),
    wellFormed: /well-formed UTF-16/.test(parsed.detail),
  };
}

// LIMITER_CONFIG may be JSON (with "\ud800" escapes) or a TOML table: either way a string that is
// not well-formed UTF-16 is a config error naming where it is, whatever the field.
describe("LIMITER_CONFIG strings that are not well-formed UTF-16", () => {
  const rule = { name: "a", limit: 1, window: "1m" };
  const cases: [label: string, input: Record<string, unknown>, field: string][] = [
    ["a rule name", { rules: [{ ...rule, name: "a\ud800" }] }, "rules[0].name"],
    [
      "a later rule's window",
      { rules: [rule, { ...rule, name: "b", window: "\udc00" }] },
      "rules[1].window",
    ],
    ["a rule key", { rules: [{ ...rule, key: "header:x\udfff" }] }, "rules[0].key"],
    [
      "a path",
      { rules: [{ ...rule, match: { path: ["/a", "/\ud800"] } }] },
      "rules[0].match.path[1]",
    ],
    [
      "a method",
      { rules: [{ ...rule, match: { methods: ["\udbff"] } }] },
      "rules[0].match.methods[0]",
    ],
    ["the prefix", { prefix: "p\ud800" }, "prefix"],
    ["a request id header", { rules: [], requestIdHeaders: ["\udc00x"] }, "requestIdHeaders[0]"],
    ["a field name", { rules: [{ ...rule, "\ud800": 1 }] }, "rules[0]"],
  ];
  for (const [label, input, field] of cases) {
    it(`names "${field}" for ${label}, as an object and as JSON`, () => {
      for (const raw of [input, JSON.stringify(input)]) {
        expect(outcome(parseConfig(raw))).toEqual({
          field: JSON.stringify(field),
          wellFormed: true,
        });
      }
    });
  }

  it("rules given in code (the middleware) are checked the same way", () => {
    expect(outcome(parseRules([{ ...rule, name: "\ud800" }]))).toEqual({
      field: JSON.stringify("rules[0].name"),
      wellFormed: true,
    });
  });
});

describe("a required field left out", () => {
  it("is named as required, whatever its schema would say of a wrong value", () => {
    for (const field of ["name", "limit", "window"] as const) {
      const rule: Record<string, unknown> = { name: "a", limit: 1, window: "1m" };
      delete rule[field];
      const parsed = parseRules([rule]);
      expect(parsed.ok).toBe(false);
      if (parsed.ok) continue;
      expect({ field: parsed.field, detail: parsed.detail }).toEqual({
        field: `rules[0].${field}`,
        detail: "is required",
      });
    }
  });
});

describe("windows as @upstash/ratelimit users write them", () => {
  const windowOf = (window: unknown) => {
    const parsed = parseRules([{ name: "a", limit: 1, window }]);
    return parsed.ok ? parsed.value[0]?.windowMs : parsed.detail;
  };

  it("reads a number and a unit's name, with or without a space, in any case", () => {
    expect(windowOf("10 sec")).toBe(10_000);
    expect(windowOf("10 s")).toBe(10_000);
    expect(windowOf("1 minute")).toBe(60_000);
    expect(windowOf("2 hours")).toBe(7_200_000);
    expect(windowOf("1 Day")).toBe(86_400_000);
    expect(windowOf("250 ms")).toBe(250);
    expect(windowOf("1m")).toBe(60_000);
    expect(windowOf(1500)).toBe(1500);
  });

  it("refuses anything else with the accepted forms", () => {
    for (const bad of ["10 fortnights", "1 constructor", "ten seconds", "1.5m", "-1s", "m"]) {
      expect(windowOf(bad), bad).toMatch(/"10 sec", "1 minute"/);
    }
  });
});
