import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/limiter-config";

// The config of plans (docs/plans.md): a rule's `overrides`, and `networkBlocks`.
const parse = (config: unknown) => parseConfig(JSON.stringify(config));

describe("plans in LIMITER_CONFIG", () => {
  it("reads overrides (off by default) and networkBlocks (off; true is the default refresh)", () => {
    const read = parse({
      rules: [
        { name: "a", limit: 5, window: "1m", overrides: true },
        { name: "b", limit: 5, window: "1m" },
      ],
      networkBlocks: true,
    });
    expect(read.ok && read.value.rules.map((rule) => rule.overrides)).toEqual([true, false]);
    expect(read.ok && read.value.networkBlocks).toEqual({ refreshMs: 1_000 });
    const off = parse({ rules: [] });
    expect(off.ok && off.value.networkBlocks).toBe(false);
    const tuned = parse({ networkBlocks: { refreshMs: 5_000 } });
    expect(tuned.ok && tuned.value.networkBlocks).toEqual({ refreshMs: 5_000 });
  });

  it("refuses what it cannot honour, naming the field", () => {
    const cases: [unknown, string][] = [
      [{ rules: [{ name: "a", limit: 5, window: "1m", overrides: "yes" }] }, "rules[0].overrides"],
      [
        { rules: [{ name: "a", limit: 5, window: "1m", overrides: true, lease: true }] },
        "rules[0].lease",
      ],
      [{ networkBlocks: "on" }, "networkBlocks"],
      [{ networkBlocks: { refreshMs: 10 } }, "networkBlocks"],
      [{ networkBlocks: { every: 1 } }, "networkBlocks"],
    ];
    for (const [config, field] of cases) {
      const read = parse(config);
      expect(read.ok, JSON.stringify(config)).toBe(false);
      if (!read.ok)
        expect(read.field, JSON.stringify(config)).toMatch(
          new RegExp(`^${field.replace(/[[\].]/g, "\\$&")}`),
        );
    }
    const leased = parse({
      rules: [{ name: "a", limit: 5, window: "1m", overrides: true, lease: true }],
    });
    expect(!leased.ok && leased.detail).toMatch(/spend past a change/);
  });
});
