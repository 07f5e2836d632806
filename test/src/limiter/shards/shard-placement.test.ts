// Rendezvous placement of client keys over shard names, and the shard options createLimiter
// refuses (no store is asked: these are properties of the hash and the option checks).
import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../../src/limiter/create-limiter";
import { createPlacement } from "../../../../src/limiter/shards/placement";
import { storeAt } from "../../../support/worker/fault-control";

const KEYS = Array.from({ length: 30_000 }, (_, i) => `client-${i}-${(i * 7919) % 1000}`);

function spread(names: string[]) {
  const placement = createPlacement(names);
  const counts = new Map(names.map((name) => [name, 0]));
  const where = KEYS.map((key) => names[placement.of(key)] as string);
  for (const name of where) counts.set(name, (counts.get(name) ?? 0) + 1);
  return { where, counts };
}

describe("shard placement", () => {
  it("is stable: the same key on the same shard, whatever built the placement", () => {
    const a = spread(["", "B", "C"]).where;
    const b = spread(["", "B", "C"]).where;
    expect(a).toEqual(b);
    // The names decide, not their order.
    const reordered = createPlacement(["C", "", "B"]);
    const names = ["C", "", "B"];
    expect(KEYS.map((key) => names[reordered.of(key)])).toEqual(a);
  });

  it("is balanced within 5% of an even share over 30 000 keys", () => {
    for (const names of [
      ["0", "1"],
      ["", "B", "C"],
      ["a", "b", "c", "d", "e"],
    ]) {
      const { counts } = spread(names);
      const even = KEYS.length / names.length;
      for (const count of counts.values()) {
        expect(Math.abs(count - even) / even).toBeLessThan(0.05);
      }
    }
  });

  it("adding a shard moves about 1/N of the keys, all to the new shard", () => {
    const before = spread(["", "B", "C"]).where;
    const after = spread(["", "B", "C", "D"]).where;
    let moved = 0;
    before.forEach((name, i) => {
      if (after[i] !== name) {
        moved++;
        expect(after[i]).toBe("D");
      }
    });
    expect(Math.abs(moved / KEYS.length - 1 / 4)).toBeLessThan(0.02);
  });

  it("removing a shard moves only that shard's keys", () => {
    const before = spread(["", "B", "C", "D"]).where;
    const after = spread(["", "B", "D"]).where;
    before.forEach((name, i) => {
      if (name === "C") expect(after[i]).not.toBe("C");
      else expect(after[i]).toBe(name);
    });
  });
});

describe("shard options", () => {
  const a = storeAt("http://127.0.0.1:1", 100);
  const b = storeAt("http://127.0.0.1:2", 100);
  const c = storeAt("http://127.0.0.1:3", 100);
  it("throws, naming the field, for a store or reshard it cannot place keys over", () => {
    expect(() => createLimiter({ store: [] })).toThrow(/^store: name at least one shard/);
    expect(() => createLimiter({ store: {} })).toThrow(/^store: /);
    expect(() => createLimiter({ store: [a, a] })).toThrow(/^store\[1\]: the same client/);
    expect(() => createLimiter({ store: { A: a, B: {} as never } })).toThrow(/^store\["B"\]/);
    expect(() => createLimiter({ store: a, reshard: { from: ["0"], at: 1 } })).toThrow(/^reshard/);
    expect(() => createLimiter({ store: [a, b], reshard: { from: [], at: 1 } })).toThrow(
      /^reshard\.from/,
    );
    expect(() => createLimiter({ store: [a, b], reshard: { from: ["0", "X"], at: 1 } })).toThrow(
      /^reshard\.from\[1\]/,
    );
    expect(() => createLimiter({ store: [a, b], reshard: { from: ["0", "0"], at: 1 } })).toThrow(
      /^reshard\.from\[1\]: "0" is named twice/,
    );
    for (const at of [Number.NaN, -1, 1.5, new Date("nope")]) {
      expect(() => createLimiter({ store: [a, b], reshard: { from: ["0"], at } })).toThrow(
        /^reshard\.at/,
      );
    }
    expect(() =>
      createLimiter({ store: [a, b], reshard: { from: ["0"], at: 1, stores: { "1": c } } }),
    ).toThrow(/^reshard\.stores\["1"\]: already a shard/);
    expect(() =>
      createLimiter({ store: [a, b], reshard: { from: ["0"], at: 1, stores: { Z: c } } }),
    ).toThrow(/^reshard\.stores\["Z"\]: not in reshard\.from/);
    // A reshard that moves no key: the same shards, in any order.
    expect(() =>
      createLimiter({ store: [a, b, c], reshard: { from: ["0", "2", "1"], at: 1 } }),
    ).toThrow(/^reshard\.from: the same shards as store/);
    // The first shard holds the network blocks: another first would start with none.
    expect(() =>
      createLimiter({
        store: { B: b, C: c },
        reshard: { from: ["A", "B"], at: 1, stores: { A: a } },
      }),
    ).toThrow(/^reshard\.from\[0\]: "A" is not store's first shard "B"/);
  });

  it("takes a removed shard's client in reshard.stores, and reports the placements", () => {
    const at = 1_900_000_000_000;
    const limiter = createLimiter({
      store: { "": a, B: b },
      reshard: { from: ["", "B", "C"], at: new Date(at), stores: { C: c } },
    });
    expect(limiter.shards().map((s) => [s.name, s.placed, s.previous, s.breaker])).toEqual([
      ["", true, true, "closed"],
      ["B", true, true, "closed"],
      ["C", false, true, "closed"],
    ]);
    expect(limiter.placement(at - 1)).toMatchObject({ phase: "before", shards: ["", "B", "C"] });
    expect(limiter.placement(at)).toMatchObject({ phase: "transition", shards: ["", "B"], at });
    const ends = limiter.placement(at).transitionEndsBy as number;
    expect(limiter.placement(ends)).toMatchObject({ phase: "after", shards: ["", "B"] });
    // Before the instant a key of C is decided there; from it, never.
    const onC = KEYS.find((key) => limiter.shardOf(key, at - 1) === "C") as string;
    expect(limiter.shardOf(onC, at)).not.toBe("C");
    expect(createLimiter({ store: a }).placement()).toEqual({ phase: "single", shards: [""] });
  });
});
