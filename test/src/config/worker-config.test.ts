import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/limiter-config";

describe("a required LIMITER_CONFIG that holds nothing", () => {
  it("absent is 'not set'; set but empty or only whitespace is 'blank' (it is set)", () => {
    const cases: [unknown, RegExp][] = [
      [undefined, /^is not set: /],
      [null, /^is not set: /],
      ["", /^is blank: /],
      ["   ", /^is blank: /],
      ["\n\t ", /^is blank: /],
    ];
    for (const [raw, detail] of cases) {
      const parsed = parseConfig(raw, { required: true });
      expect(parsed, JSON.stringify(raw)).toMatchObject({ ok: false, field: "LIMITER_CONFIG" });
      expect(parsed.ok ? "" : parsed.detail, JSON.stringify(raw)).toMatch(detail);
    }
  });
});
