import { describe, expect, it } from "vitest";
import { foldConstants } from "../../../src/store/lua/fold-constants";
import { EVALUATE_SCRIPTS, REFUND_SCRIPT } from "../../../src/store/lua/scripts";

describe("foldConstants", () => {
  it("replaces a constant by its literal and drops its declaration", () => {
    const lua =
      "local HDR = 47\nlocal GAP = '\\255'\nlocal ON = false\nreturn HDR + 1, GAP, ON and 1\n";
    expect(foldConstants(lua)).toBe("return 47 + 1, '\\255', false and 1\n");
  });

  it("keeps a name assigned after its declaration a local", () => {
    const lua = "local GRACE = 0\nif ARGV[1] then GRACE = 1000 end\nreturn GRACE\n";
    expect(foldConstants(lua)).toBe(lua);
  });

  it("leaves fields, longer names and comparisons alone", () => {
    const lua = "local N = 3\nreturn t.N, N_MAX, N == 3, N\n";
    expect(foldConstants(lua)).toBe("return t.N, N_MAX, 3 == 3, 3\n");
  });

  it("keeps a name that is also a table constructor's field a local (the field would break)", () => {
    const lua = "local N = 3\nlocal t = { N = 1 }\nreturn N\n";
    expect(foldConstants(lua)).toBe(lua);
  });

  it("leaves no folded constant declared in the composed scripts", () => {
    for (const script of [...Object.values(EVALUATE_SCRIPTS), REFUND_SCRIPT]) {
      expect(script).not.toMatch(/^local (RING_HDR|GAP_DRIFT|STAMP_AHEAD_MAX|REFUNDS) =/m);
      expect(script).toMatch(/^local GRACE = 0$/m);
    }
  });
});
