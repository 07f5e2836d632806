import { describe, expect, it } from "vitest";
import { parseCheckBody } from "../../../src/http/check-request";
import { createPolicyMemo } from "../../../src/http/policy-memo";

const NO_RULES = new Map();

/** A memo over a reader that counts its calls and echoes the fields it was given. */
function counted(max?: number) {
  let reads = 0;
  const read = (body: Record<string, unknown>) => {
    reads++;
    return { limit: body.limit, window: body.window, cost: body.cost };
  };
  return {
    memo: createPolicyMemo(["algorithm", "limit", "window", "cost", "lease"], read, max),
    reads: () => reads,
  };
}

describe("createPolicyMemo", () => {
  it("reads a set of policy values once, whatever else the body carries", () => {
    const { memo, reads } = counted();
    const first = memo({ key: "a", limit: 100, window: "1m" });
    expect(memo({ key: "b", limit: 100, window: "1m" })).toBe(first);
    expect(memo({ key: "c", limit: 100, window: "1m", requestId: "r" })).toBe(first);
    expect(reads()).toBe(1);
    expect(memo({ limit: 101, window: "1m" })).toEqual({ limit: 101, window: "1m" });
    expect(reads()).toBe(2);
  });

  it("never takes one body's values for another's", () => {
    const { memo, reads } = counted();
    const bodies: Record<string, unknown>[] = [
      { limit: 100, window: "1m" },
      { limit: "100", window: "1m" },
      { limit: 100, window: "1m", cost: 1 },
      { limit: 100, window: "1m", cost: "1" },
      { limit: 100, window: "1m", cost: true },
      // A string holding what another body's next field would spell.
      { limit: 100, window: "1mn1|" },
      { limit: 100, window: "1m", cost: 1, lease: false },
      { limit: 100, window: "1m", cost: 1, lease: true },
      { limit: 1e21, window: "1m" },
      // JSON.parse("1e999") is Infinity.
      { limit: Number.POSITIVE_INFINITY, window: "1m" },
      { algorithm: "fixed-window", limit: 100, window: "1m" },
    ];
    const results = bodies.map((body) => memo(body));
    expect(reads()).toBe(bodies.length);
    expect(new Set(results).size).toBe(bodies.length);
    // And each again hits its own entry.
    for (const [i, body] of bodies.entries()) expect(memo(body)).toBe(results[i]);
    expect(reads()).toBe(bodies.length);
  });

  it("reads afresh a body with an object, an array or -0 among the policy fields", () => {
    const { memo, reads } = counted();
    for (const body of [
      { limit: { n: 1 }, window: "1m" },
      { limit: 100, window: ["1m"] },
      { limit: 100, window: "1m", cost: null },
      { limit: -0, window: "1m" },
    ]) {
      memo(body);
      memo(body);
    }
    expect(reads()).toBe(8);
  });

  it("stays bounded: past its size it starts over", () => {
    const { memo, reads } = counted(3);
    for (let i = 0; i < 4; i++) memo({ limit: i, window: "1m" });
    expect(reads()).toBe(4);
    memo({ limit: 3, window: "1m" });
    expect(reads()).toBe(4);
    memo({ limit: 0, window: "1m" });
    expect(reads()).toBe(5);
  });
});

describe("an ad-hoc /check body through the memo", () => {
  it("gives each body its own request, with its own key", () => {
    const a = parseCheckBody({ key: "a", limit: 7, window: "1m" }, NO_RULES);
    const b = parseCheckBody({ key: "b", limit: 7, window: "1m" }, NO_RULES);
    if (!a.ok || !b.ok) throw new Error("both bodies are valid");
    const [first] = a.value.requests;
    const [second] = b.value.requests;
    expect(first).not.toBe(second);
    expect(first).toMatchObject({ key: "a", limit: 7, windowMs: 60_000 });
    expect(second).toMatchObject({ key: "b", limit: 7, windowMs: 60_000 });
    if (first) first.limit = 1;
    const again = parseCheckBody({ key: "c", limit: 7, window: "1m" }, NO_RULES);
    expect(again.ok && again.value.requests[0]?.limit).toBe(7);
  });

  it("refuses a body the same way before and after a valid one with the same values in print", () => {
    const wrong = { key: "k", limit: "50", window: "1m" };
    const right = { key: "k", limit: 50, window: "1m" };
    const before = parseCheckBody(wrong, NO_RULES);
    expect(before).toMatchObject({ ok: false, field: "limit" });
    expect(parseCheckBody(right, NO_RULES).ok).toBe(true);
    expect(parseCheckBody(wrong, NO_RULES)).toEqual(before);
    expect(parseCheckBody({ key: "k", limit: 50, window: "1m", cost: 51 }, NO_RULES)).toMatchObject(
      { ok: false, field: "cost" },
    );
  });
});

describe("createPolicyMemo's bytes", () => {
  it("a body with long policy values is read afresh, never remembered (its values stay its own)", () => {
    const { memo, reads } = counted();
    const long = { limit: 100, window: `1m${" ".repeat(10_000)}` };
    memo(long);
    memo(long);
    expect(reads()).toBe(2);
    // Short values still hit.
    memo({ limit: 100, window: "1m" });
    memo({ limit: 100, window: "1m" });
    expect(reads()).toBe(3);
  });
});
