// Scripts through the bridge: EVAL / EVALSHA / NOSCRIPT / SCRIPT LOAD, the Upstash-only
// `allow-key-locking` shebang flag, and recovery after a real SCRIPT FLUSH (allowed on the shared
// Redis: every client recovers from NOSCRIPT by sending EVAL).
import { createHash } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { stripUpstashFlags } from "../../bridge/script-shebang.mjs";
import { bridgeRedis, deletePrefix, postRaw, uniquePrefix } from "../support/bridge-client.js";

const redis = bridgeRedis();
const prefix = uniquePrefix("scripts");
const key = (name: string) => `${prefix}${name}`;
const sha1 = (text: string) => createHash("sha1").update(text, "utf8").digest("hex");

// A fresh script text per run, so its SHA is not already cached by another test or person.
const marker = `-- ${prefix}`;
const flagged = `#!lua flags=allow-key-locking
${marker}
return redis.call("INCRBY", KEYS[1], ARGV[1])`;
const plain = `${marker}\nreturn {KEYS[1], ARGV[1]}`;

afterAll(async () => {
  await deletePrefix(redis, prefix);
});

describe("stripUpstashFlags", () => {
  it("drops only allow-key-locking", () => {
    expect(stripUpstashFlags("#!lua flags=allow-key-locking\nreturn 1")).toBe("#!lua\nreturn 1");
    expect(stripUpstashFlags("#!lua flags=no-writes,allow-key-locking\nreturn 1")).toBe(
      "#!lua flags=no-writes\nreturn 1",
    );
    expect(stripUpstashFlags("#!lua flags=allow-key-locking,no-writes name=x\r\nx")).toBe(
      "#!lua flags=no-writes name=x\r\nx",
    );
    expect(stripUpstashFlags("#!lua flags=allow-key-locking")).toBe("#!lua");
  });

  it("leaves other scripts alone", () => {
    expect(stripUpstashFlags("return 1")).toBeNull();
    expect(stripUpstashFlags("#!lua flags=no-writes\nreturn 1")).toBeNull();
    expect(stripUpstashFlags("return 1 -- flags=allow-key-locking")).toBeNull();
    expect(stripUpstashFlags("#!lua\n-- flags=allow-key-locking")).toBeNull();
  });
});

describe("plain scripts", () => {
  it("EVAL, then EVALSHA by the same SHA; an unknown SHA answers NOSCRIPT", async () => {
    expect(await redis.eval(plain, [key("a")], ["1"])).toEqual([key("a"), 1]);
    expect(await redis.evalsha(sha1(plain), [key("b")], ["x"])).toEqual([key("b"), "x"]);
    await expect(redis.evalsha(sha1(`${plain} -- never loaded`), [], [])).rejects.toThrow(
      /NOSCRIPT/,
    );
    const { status, json } = await postRaw("/", JSON.stringify(["evalsha", "0".repeat(40), 0]));
    expect(status).toBe(400);
    expect(json).toEqual({ error: expect.stringMatching(/^NOSCRIPT/) });
  });
});

describe("scripts with #!lua flags=allow-key-locking", () => {
  it("run with EVAL (stock Redis would reject the flag)", async () => {
    expect(await redis.eval(flagged, [key("n")], ["5"])).toBe(5);
  });

  it("SCRIPT LOAD answers the original text's SHA, and EVALSHA / SCRIPT EXISTS accept it", async () => {
    const sha = await redis.scriptLoad(flagged);
    expect(sha).toBe(sha1(flagged));
    expect(await redis.scriptExists(sha)).toEqual([1]);
    expect(await redis.evalsha(sha, [key("n")], ["2"])).toBe(7);
  });

  it("keep their other flags", async () => {
    const readOnly = `#!lua flags=allow-key-locking,no-writes\n${marker}\nreturn redis.call("SET", KEYS[1], "x")`;
    await expect(redis.eval(readOnly, [key("ro")], [])).rejects.toThrow(
      /Write commands are not allowed/,
    );
    const reader = `#!lua flags=no-writes,allow-key-locking\n${marker}\nreturn redis.call("GET", KEYS[1])`;
    expect(await redis.evalRo(reader, [key("n")], [])).toBe(7);
    expect(await redis.evalshaRo(sha1(reader), [key("n")], [])).toBe(7);
  });

  it("recover from a real SCRIPT FLUSH through NOSCRIPT → EVAL", async () => {
    const sha = await redis.scriptLoad(flagged);
    expect(await redis.evalsha(sha, [key("f")], ["1"])).toBe(1);

    expect(await redis.scriptFlush()).toBe("OK");
    expect(await redis.scriptExists(sha)).toEqual([0]);
    await expect(redis.evalsha(sha, [key("f")], ["1"])).rejects.toThrow(/NOSCRIPT/);

    // The client's own fallback (Script.exec: EVALSHA, on NOSCRIPT EVAL) works again at once.
    const script = redis.createScript<number>(flagged);
    expect(await script.exec([key("f")], ["1"])).toBe(2);
    expect(await redis.evalsha(sha, [key("f")], ["1"])).toBe(3);
  });

  it("work inside pipelines and transactions", async () => {
    const sha = await redis.scriptLoad(flagged);
    // Loaded in the transaction too: another test's SCRIPT FLUSH on the shared store cannot
    // come between the load and the EVALSHA.
    const results = await redis
      .multi()
      .scriptLoad(flagged)
      .evalsha(sha, [key("tx")], ["10"])
      .eval(flagged, [key("tx")], ["1"])
      .exec();
    expect(results).toEqual([sha, 10, 11]);
    const piped = await redis
      .pipeline()
      .scriptLoad(flagged)
      .evalsha(sha, [key("tx")], ["1"])
      .exec();
    expect(piped).toEqual([sha, 12]);
  });
});
