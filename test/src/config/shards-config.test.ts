/**
 * LIMITER_CONFIG's `shards` and `reshard` (docs/shards.md): what the config takes and refuses,
 * each refusal naming its field.
 */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/limiter-config";

describe("shards in LIMITER_CONFIG", () => {
  it("takes shard names, the unsuffixed one included, and a reshard with its instant", () => {
    const parsed = parseConfig({
      shards: ["", "B", "C_2"],
      reshard: { from: ["", "B"], at: "2026-12-10T12:00:00Z" },
    });
    expect(parsed.ok && parsed.value.shards).toEqual(["", "B", "C_2"]);
    expect(parsed.ok && parsed.value.reshard).toEqual({
      from: ["", "B"],
      at: Date.UTC(2026, 11, 10, 12),
    });
  });

  it("leaves both out by default: one database, as without shards", () => {
    const parsed = parseConfig({});
    expect(parsed.ok && parsed.value.shards).toBeUndefined();
    expect(parsed.ok && parsed.value.reshard).toBeUndefined();
  });

  it.each([
    [{ shards: "B" }, "shards"],
    [{ shards: [] }, "shards"],
    [{ shards: ["B", "B"] }, "shards"],
    [{ shards: ["b"] }, "shards[0]"],
    [{ shards: ["", 7] }, "shards[1]"],
    [{ shards: ["", "2"] }, "shards[1]"],
    [{ shards: Array.from({ length: 17 }, (_, i) => `S${i}`) }, "shards"],
    [
      { shards: ["", "B"], reshard: { from: ["", ""], at: "2026-12-10T12:00:00Z" } },
      "reshard.from",
    ],
    [
      { shards: ["", "B"], reshard: { from: ["", "b"], at: "2026-12-10T12:00:00Z" } },
      "reshard.from[1]",
    ],
    [{ shards: ["", "B"], reshard: { from: "B", at: "2026-12-10T12:00:00Z" } }, "reshard.from"],
    [{ shards: ["", "B"], reshard: { from: [""], at: "tomorrow" } }, "reshard.at"],
    [{ shards: ["", "B"], reshard: { from: [""], at: "2026-13-40T99:00:00Z" } }, "reshard.at"],
    [{ shards: ["", "B"], reshard: { from: [""] } }, "reshard.at"],
    [
      { shards: ["", "B"], reshard: { from: [""], at: "2026-12-10T12:00:00Z", by: 1 } },
      "reshard.by",
    ],
    [{ reshard: { from: [""], at: "2026-12-10T12:00:00Z" } }, "reshard"],
    // A reshard that moves no key (the same shards, in any order): nothing to reshard.
    [
      { shards: ["", "B"], reshard: { from: ["B", ""], at: "2026-12-10T12:00:00Z" } },
      "reshard.from",
    ],
    // The first shard holds the network blocks and analytics: a reshard keeps it first.
    [
      { shards: ["B", "C"], reshard: { from: ["", "B"], at: "2026-12-10T12:00:00Z" } },
      "reshard.from",
    ],
    [
      { shards: ["C", "", "B"], reshard: { from: ["", "B"], at: "2026-12-10T12:00:00Z" } },
      "reshard.from",
    ],
  ])("refuses %j, naming %s", (config, field) => {
    const parsed = parseConfig(config);
    expect(parsed.ok ? "ok" : parsed.field).toBe(field);
  });
});
