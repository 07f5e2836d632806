import { describe, expect, expectTypeOf, it } from "vitest";
import { parseConfig, parseRules } from "../../../src/config/limiter-config";
import type { RuleInput } from "../../../src/config/rule-schema";
import type { Validated } from "../../../src/config/validation";
import { parseCheckBody } from "../../../src/http/check-request";
import type { RateLimitRule } from "../../../src/index";

// One rule shape: a LIMITER_CONFIG rule, a middleware rule and a /check body read the fields they
// share with the same schema parts, so a wrong value is refused in the same words on every
// surface (each names the field as that surface spells it).

function detail(parsed: Validated<unknown>): string {
  return parsed.ok ? "accepted" : `${parsed.field}: ${parsed.detail}`;
}

describe("the fields a rule and a /check body share are refused in the same words", () => {
  const rule = { name: "a", limit: 10, window: "1m" };
  const check = { key: "k", limit: 10, window: "1m" };
  const cases: [field: string, value: unknown][] = [
    ["window", "8d"],
    ["window", "soon"],
    ["window", 0],
    ["limit", 0],
    ["limit", 100_001],
    ["limit", "10"],
    ["cost", 1.5],
    ["cost", 11],
    ["algorithm", "leaky-bucket"],
  ];
  for (const [field, value] of cases) {
    it(`${field}: ${JSON.stringify(value)}`, () => {
      const bad = { [field]: value };
      // Fixed-window: its limit cap is the config's own (the sliding log's is smaller).
      const ruleWith = { ...rule, algorithm: "fixed-window", ...bad };
      const checkWith = { ...check, algorithm: "fixed-window", ...bad };
      const fromConfig = detail(parseConfig({ rules: [ruleWith] }));
      const fromMiddleware = detail(parseRules([ruleWith]));
      const fromCheck = detail(parseCheckBody(checkWith, new Map()));
      expect(fromConfig).not.toBe("accepted");
      expect(fromMiddleware).toBe(fromConfig);
      expect(fromCheck).toBe(fromConfig.replace(`rules[0].${field}`, field));
    });
  }
});

describe("the middleware's rule type is the rule schema's input", () => {
  it("RateLimitRule is RuleInput, with limit and cost also functions of the context", () => {
    expectTypeOf<Omit<RateLimitRule, "limit" | "cost">>().toEqualTypeOf<
      Omit<RuleInput, "limit" | "cost">
    >();
    expectTypeOf<RuleInput["limit"]>().toMatchTypeOf<RateLimitRule["limit"]>();
    expectTypeOf<RateLimitRule["limit"]>().not.toEqualTypeOf<RuleInput["limit"]>();
    // A rule as the README writes it type-checks and parses.
    const rule: RateLimitRule = {
      name: "login",
      limit: 5,
      window: "10m",
      key: "header:X-Api-Key",
      match: { path: "/login", methods: ["POST"] },
      algorithm: "token-bucket",
      refundOn: "5xx",
    };
    expect(parseRules([rule]).ok).toBe(true);
  });
});

describe("an unknown field is told the known one it resembles", () => {
  const rule = { name: "a", limit: 10, window: "1m" };
  const cases: [config: Record<string, unknown>, said: string][] = [
    [
      { rules: [{ name: "a", limit: 10, windw: "1m" }] },
      'rules[0].windw: unknown field (did you mean "window"?)',
    ],
    [
      { rules: [{ ...rule, match: { pth: "/x" } }] },
      'rules[0].match.pth: unknown field (did you mean "path"?)',
    ],
    [{ rules: [rule], timeotMs: 100 }, 'timeotMs: unknown field (did you mean "timeoutMs"?)'],
    [
      { rules: [rule], breaker: { coolDownMs: 5 } },
      'breaker.coolDownMs: unknown field (did you mean "cooldownMs"?)',
    ],
    [
      { rules: [rule], analytics: { enabeld: true } },
      'analytics.enabeld: unknown field (did you mean "enabled"?)',
    ],
    // Nothing close: no guess.
    [{ rules: [rule], colour: "red" }, "colour: unknown field"],
  ];
  for (const [config, said] of cases) {
    it(said, () => {
      expect(detail(parseConfig(JSON.stringify(config)))).toBe(said);
    });
  }

  it("the middleware's rules and a /check body say the same", () => {
    expect(detail(parseRules([{ name: "a", limit: 10, widnow: "1m" }]))).toBe(
      'rules[0].widnow: unknown field (did you mean "window"?)',
    );
    expect(detail(parseCheckBody({ key: "k", limt: 5, window: "1m" }, new Map()))).toBe(
      'limt: unknown field (did you mean "limit"?)',
    );
  });
});

describe("a calendar quota's fields are read, and refused, in the same words everywhere", () => {
  const rule = { name: "a", limit: 10, period: "month" };
  const check = { key: "k", limit: 10, period: "month" };
  const cases: [label: string, fields: Record<string, unknown>, field: string][] = [
    ["window and period", { window: "1m" }, "period"],
    ["an unknown period", { period: "fortnight" }, "period"],
    ["an unknown timezone", { timezone: "Europe/Atlantis" }, "timezone"],
    ["a zone-less anchor", { anchor: "2026-01-31T00:00:00" }, "anchor"],
    ["an anchor past the month's end", { anchor: "2026-04-31T00:00:00Z" }, "anchor"],
    ["another algorithm", { algorithm: "token-bucket" }, "algorithm"],
    ["a lease", { lease: true }, "lease"],
  ];
  for (const [label, fields, field] of cases) {
    it(`${label}: refused naming ${field}`, () => {
      const fromConfig = detail(parseConfig({ rules: [{ ...rule, ...fields }] }));
      const fromMiddleware = detail(parseRules([{ ...rule, ...fields }] as RuleInput[]));
      const fromCheck = detail(parseCheckBody({ ...check, ...fields }, new Map()));
      expect(fromConfig).toMatch(new RegExp(`^rules\\[0\\]\\.${field}: `));
      expect(fromMiddleware).toBe(fromConfig);
      expect(fromCheck).toBe(fromConfig.replace(`rules[0].${field}`, field));
    });
  }

  it("a period rule reads as a calendar quota: its zone canonical, its anchor in ms", () => {
    const parsed = parseConfig({
      rules: [
        { ...rule, timezone: "europe/berlin", anchor: "2026-01-31T09:00:00+01:00" },
        { name: "b", limit: 5, period: "day" },
      ],
    });
    if (!parsed.ok) throw new Error(detail(parsed));
    expect(parsed.value.rules[0]).toMatchObject({
      algorithm: "calendar",
      windowMs: 31 * 86_400_000 + 3_600_000,
      period: {
        unit: "month",
        timezone: "Europe/Berlin",
        anchor: Date.parse("2026-01-31T08:00:00Z"),
      },
    });
    expect(parsed.value.rules[1]).toMatchObject({
      algorithm: "calendar",
      period: { unit: "day", timezone: "UTC" },
    });
    expect(parsed.value.rules[1]).not.toHaveProperty("period.anchor");
  });

  it("timezone or anchor without a period, and algorithm calendar without one, are refused", () => {
    expect(
      detail(parseConfig({ rules: [{ name: "a", limit: 1, window: "1m", timezone: "UTC" }] })),
    ).toBe('rules[0].timezone: applies to calendar quotas only: it needs "period"');
    expect(
      detail(
        parseConfig({ rules: [{ name: "a", limit: 1, window: "1m", algorithm: "calendar" }] }),
      ),
    ).toMatch(/^rules\[0\]\.period: is required by algorithm "calendar"/);
  });

  it("a reshard with a period rule is refused, saying why", () => {
    const parsed = parseConfig({
      shards: ["", "B"],
      reshard: { from: [""], at: "2030-01-01T00:00:00Z" },
      rules: [{ name: "a", limit: 1, window: "1m" }, rule],
    });
    expect(detail(parsed)).toMatch(/^rules\[1\]\.period: cannot be used during a "reshard"/);
  });
});

describe("a rule's usage (docs/usage.md)", () => {
  const rule = { name: "tokens", limit: 1_000_000_000_000, window: "1m", cost: 500 };

  it("a reshard with a usage rule is refused, saying why; without one it is accepted", () => {
    const config = (rules: unknown[]) => ({
      shards: ["", "B"],
      reshard: { from: [""], at: "2030-01-01T00:00:00Z" },
      rules,
    });
    const usage = { ...rule, usage: { json: "usage.total_tokens" } };
    expect(detail(parseConfig(config([{ name: "a", limit: 1, window: "1m" }, usage])))).toMatch(
      /^rules\[1\]\.usage: cannot be used during a "reshard"/,
    );
    expect(parseConfig(config([{ name: "a", limit: 1, window: "1m" }])).ok).toBe(true);
  });
  it("is read as a lower-cased header or JSON paths split, and counts in the weighted log", () => {
    const parsed = parseConfig({
      rules: [
        { ...rule, usage: { header: "X-Usage-Tokens" } },
        { ...rule, name: "b", usage: { json: ["usage.input_tokens", "usage.output_tokens"] } },
        { ...rule, name: "c", usage: { json: "usage.total_tokens" } },
      ],
    });
    if (!parsed.ok) throw new Error(detail(parsed));
    expect(parsed.value.rules.map((r) => [r.algorithm, r.usage])).toEqual([
      ["sliding-log-weighted", { header: "x-usage-tokens" }],
      ["sliding-log-weighted", { json: ["usage.input_tokens", "usage.output_tokens"] }],
      ["sliding-log-weighted", { json: ["usage.total_tokens"] }],
    ]);
  });

  const bad: [usage: unknown, field: string][] = [
    [{ header: "x usage" }, "rules[0].usage.header"],
    [{ header: "" }, "rules[0].usage.header"],
    [{ json: "usage..total" }, "rules[0].usage.json"],
    [{ json: ".usage" }, "rules[0].usage.json"],
    [{ json: [] }, "rules[0].usage.json"],
    [{ json: Array.from({ length: 9 }, (_, i) => `p${i}`) }, "rules[0].usage.json"],
    [{ json: 5 }, "rules[0].usage.json"],
    [{ header: "x", json: "y" }, "rules[0].usage"],
    [{}, "rules[0].usage"],
    [{ headers: "x" }, "rules[0].usage"],
    ["x-usage", "rules[0].usage"],
  ];
  for (const [usage, field] of bad) {
    it(`refuses ${JSON.stringify(usage)}, naming ${field}`, () => {
      const parsed = parseConfig({ rules: [{ ...rule, usage }] });
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.field.startsWith(field)).toBe(true);
    });
  }

  it("counts in a fixed window or a calendar period, up to 10^12 units", () => {
    const parsed = parseConfig({
      rules: [
        { ...rule, name: "w", limit: 1e12, algorithm: "fixed-window", usage: { header: "x" } },
        {
          name: "tokens-month",
          period: "month",
          timezone: "UTC",
          limit: 5_000_000,
          cost: 4_000,
          usage: { json: "usage.total_tokens" },
          key: "header:x-api-key",
        },
      ],
    });
    if (!parsed.ok) throw new Error(detail(parsed));
    expect(parsed.value.rules.map((r) => [r.algorithm, r.limit])).toEqual([
      ["fixed-window", 1e12],
      ["calendar", 5_000_000],
    ]);
    // Past 10^12, refused as any usage rule's limit.
    const over = parseConfig({
      rules: [{ name: "o", limit: 1e12 + 1, period: "day", usage: { header: "x" } }],
    });
    expect(over.ok ? "accepted" : over.field).toBe("rules[0].limit");
  });

  it("refuses the algorithms a settle cannot charge, and a plain rule's limit past the cap", () => {
    for (const algorithm of ["token-bucket", "sliding-counter"]) {
      const given = parseConfig({
        rules: [{ ...rule, limit: 1_000, algorithm, usage: { header: "x" } }],
      });
      expect(given.ok ? "accepted" : given.field, algorithm).toBe("rules[0].usage");
      expect(detail(given)).toMatch(/"token-bucket" \(a debt that drains\)/);
    }
    const plain = parseConfig({ rules: [{ name: "p", limit: 1_000_000, window: "1m" }] });
    expect(plain.ok ? "accepted" : plain.field).toBe("rules[0].limit");
    // The O(1) algorithms' cap holds for a rule without usage.
    for (const counted of [{ algorithm: "fixed-window", window: "1m" }, { period: "month" }]) {
      const quota = parseConfig({ rules: [{ name: "q", limit: 1_000_000, ...counted }] });
      expect(detail(quota)).toMatch(/^rules\[0\]\.limit: must be an integer from 1 to 100000$/);
    }
  });
});
