// The bridge as @upstash/redis sees it: data types, encodings, pipelines and transactions.
import { afterAll, describe, expect, it } from "vitest";
import { bridgeRedis, deletePrefix, postRaw, uniquePrefix } from "../support/bridge-client.js";

const redis = bridgeRedis();
const prefix = uniquePrefix("client");
const key = (name: string) => `${prefix}${name}`;

afterAll(async () => {
  await deletePrefix(redis, prefix);
});

describe("values through the client (base64 responses)", () => {
  it("round-trips non-ASCII text byte for byte", async () => {
    const text = "héllo ✓ 日本 🚀";
    expect(await redis.set(key("text"), text)).toBe("OK");
    expect(await redis.get(key("text"))).toBe(text);
    expect(await redis.strlen(key("text"))).toBe(Buffer.byteLength(text, "utf8"));
  });

  it("keeps integers as numbers and nil as null", async () => {
    expect(await redis.incrby(key("counter"), 41)).toBe(41);
    expect(await redis.incr(key("counter"))).toBe(42);
    expect(await redis.get(key("missing"))).toBeNull();
    expect(await redis.exists(key("counter"), key("missing"))).toBe(1);
    expect(await redis.incrbyfloat(key("float"), 1.5)).toBe(1.5);
  });

  it("returns nested arrays: zrange with scores, and tables from Lua", async () => {
    await redis.zadd(key("z"), { score: 2, member: "b" }, { score: 1, member: "ä" });
    expect(await redis.zrange(key("z"), 0, -1, { withScores: true })).toEqual(["ä", 1, "b", 2]);
    expect(await redis.eval('return {1, {"a", {"ü", "OK"}}, "x"}', [], [])).toEqual([
      1,
      ["a", ["ü", "OK"]],
      "x",
    ]);
  });

  it("stores and reads hashes", async () => {
    expect(await redis.hset(key("h"), { name: "Zoë", visits: 3 })).toBe(2);
    expect(await redis.hgetall(key("h"))).toEqual({ name: "Zoë", visits: 3 });
    expect(await redis.hget(key("h"), "nope")).toBeNull();
  });

  it("round-trips a 1 MB value", async () => {
    const big = "ab✓".repeat(350_000); // 1.75 MB of UTF-8
    expect(await redis.set(key("big"), big)).toBe("OK");
    const back = await redis.get<string>(key("big"));
    expect(back?.length).toBe(big.length);
    expect(back === big).toBe(true);
  });
});

describe("pipelines", () => {
  it("keeps every other result when one command fails", async () => {
    const p = redis.pipeline();
    p.set(key("p"), "text");
    p.incr(key("p")); // WRONGTYPE-ish: not an integer
    p.get(key("p"));
    const results = await p.exec({ keepErrors: true });
    expect(results[0]).toEqual({ result: "OK", error: undefined });
    expect(results[1]?.error).toMatch(/^ERR value is not an integer/);
    expect(results[2]).toEqual({ result: "text", error: undefined });
    await expect(redis.pipeline().get(key("p")).incr(key("p")).exec()).rejects.toThrow(
      /Command 2 \[ incr \] failed: ERR value is not an integer/,
    );
  });

  it("auto-pipelined calls settle one by one", async () => {
    const [set, incr, get] = await Promise.allSettled([
      redis.set(key("auto"), "x"),
      redis.incr(key("auto")),
      redis.get(key("auto")),
    ]);
    expect(set).toEqual({ status: "fulfilled", value: "OK" });
    expect(incr.status).toBe("rejected");
    expect(get).toEqual({ status: "fulfilled", value: "x" });
  });
});

describe("multi-exec", () => {
  it("runs a transaction and answers per command", async () => {
    const results = await redis
      .multi()
      .set(key("m"), 1)
      .incr(key("m"))
      .hset(key("m"), { a: "b" }) // runtime error inside EXEC: the others still ran
      .get(key("m"))
      .exec({ keepErrors: true });
    expect([
      results[0]?.result,
      results[1]?.result,
      results[2]?.result,
      results[3]?.result,
    ]).toEqual(["OK", 2, undefined, 2]);
    expect(results[2]?.error).toMatch(/^WRONGTYPE/);
  });

  it("is atomic: no other request's command lands between its commands", async () => {
    const k = key("atomic");
    // 32 at most: the bridge refuses more /multi-exec in flight at once (maxTransactions, a 503
    // tested on its own); 40 failed when this machine was slow enough to have them all in flight.
    const rounds = Array.from({ length: 32 }, (_, i) => i);
    const transactions = rounds.map((i) => redis.multi().set(k, `tx-${i}`).get(k).exec());
    const interlopers = rounds.map((i) => redis.set(k, `other-${i}`));
    const [answers] = await Promise.all([Promise.all(transactions), Promise.all(interlopers)]);
    expect(answers).toEqual(rounds.map((i) => ["OK", `tx-${i}`]));
  });

  it("discards the whole transaction when a command cannot be queued", async () => {
    const { status, json } = await postRaw(
      "/multi-exec",
      JSON.stringify([
        ["set", key("abort"), "1"],
        ["nosuchcommand", "x"],
      ]),
    );
    expect(status).toBe(400);
    expect((json as { error: string }).error).toMatch(
      /^EXECABORT .*command 2: ERR unknown command/,
    );
    expect(await redis.exists(key("abort"))).toBe(0);
  });
});
