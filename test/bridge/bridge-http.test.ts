// The bridge's wire protocol, checked with raw HTTP where the client would hide the detail.
import { afterAll, describe, expect, inject, it } from "vitest";
import { bridgeRedis, deletePrefix, postRaw, uniquePrefix } from "../support/bridge-client.js";

const redis = bridgeRedis();
const prefix = uniquePrefix("http");
const key = (name: string) => `${prefix}${name}`;
const base64 = { "upstash-encoding": "base64" };
const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");

afterAll(async () => {
  await deletePrefix(redis, prefix);
});

describe("authorization", () => {
  it("answers 401 with a JSON error for a wrong or missing token", async () => {
    for (const authorization of [`Bearer wrong-${inject("bridgeToken")}`, "", "Basic abc"]) {
      const { status, json } = await postRaw("/pipeline", '[["ping"]]', { authorization });
      expect(status).toBe(401);
      expect(json).toEqual({ error: expect.stringMatching(/unauthorized/i) });
    }
  });

  it("makes the client reject", async () => {
    const wrong = bridgeRedis({ token: "not-the-token" });
    await expect(wrong.get(key("x"))).rejects.toThrow(/unauthorized/i);
    await expect(wrong.exec(["ping"])).rejects.toThrow(/unauthorized/i);
  });
});

describe("malformed bodies get 400 and a JSON error", () => {
  const cases: [string, string, string][] = [
    ["not JSON", "/", "set k v"],
    ["not JSON (pipeline)", "/pipeline", '[["get", "k"]'],
    ["not an array", "/", '{"cmd": "get"}'],
    ["not an array (pipeline)", "/pipeline", '"get"'],
    ["a pipeline of non-arrays", "/pipeline", '["get", "k"]'],
    ["an empty command", "/", "[]"],
    ["an empty pipeline", "/pipeline", "[]"],
    ["a non-string command name", "/", '[1, "k"]'],
    ["an object argument", "/", '["set", "k", {"a": 1}]'],
    ["an array argument", "/pipeline", '[["set", "k", ["v"]]]'],
    ["a null argument", "/multi-exec", '[["set", "k", null]]'],
  ];
  it.each(cases)("%s", async (_, path, body) => {
    const { status, json } = await postRaw(path, body);
    expect(status).toBe(400);
    expect(json).toEqual({ error: expect.stringMatching(/^ERR /) });
  });

  it("unknown endpoints get 404 and other methods 405, as JSON", async () => {
    expect((await postRaw("/get/x", "[]")).status).toBe(404);
    const res = await fetch(inject("bridgeUrl"), {
      headers: { authorization: `Bearer ${inject("bridgeToken")}` },
    });
    expect(res.status).toBe(405);
    expect(await res.json()).toEqual({ error: expect.any(String) });
  });
});

describe("responses", () => {
  it("a Redis error on / is a 400 with Redis's text verbatim", async () => {
    await redis.set(key("str"), "abc");
    const { status, json } = await postRaw("/", JSON.stringify(["incr", key("str")]));
    expect(status).toBe(400);
    expect(json).toEqual({ error: "ERR value is not an integer or out of range" });
  });

  it("encodes every string at every depth with base64, and nothing else", async () => {
    const { status, json } = await postRaw(
      "/pipeline",
      JSON.stringify([
        ["set", key("enc"), "héllo ✓ 日本"],
        ["get", key("enc")],
        ["eval", 'return {7, {"ö", false}, redis.status_reply("PONG")}', 0],
        ["get", key("none")],
        ["incr", key("enc")],
      ]),
      base64,
    );
    expect(status).toBe(200);
    expect(json).toEqual([
      { result: b64("OK") },
      { result: b64("héllo ✓ 日本") },
      { result: [7, [b64("ö"), null], b64("PONG")] },
      { result: null },
      { error: "ERR value is not an integer or out of range" },
    ]);
  });

  it("sends UTF-8 text when the client does not ask for base64", async () => {
    await redis.set(key("plain"), "héllo ✓ 日本");
    const { json } = await postRaw("/", JSON.stringify(["get", key("plain")]));
    expect(json).toEqual({ result: "héllo ✓ 日本" });
  });

  it("passes raw bytes through base64 unchanged", async () => {
    const { json } = await postRaw(
      "/",
      '["eval", "return string.char(255, 0, 1, 128)", 0]',
      base64,
    );
    expect(json).toEqual({ result: Buffer.from([255, 0, 1, 128]).toString("base64") });
  });

  it("sends each argument as the JSON token spells it", async () => {
    const body = `[
      ["set", "${key("big")}", 12345678901234567890],
      ["set", "${key("dec")}", 1.50],
      ["set", "${key("exp")}", -2E3],
      ["set", "${key("bool")}", true],
      ["mget", "${key("big")}", "${key("dec")}", "${key("exp")}", "${key("bool")}"]
    ]`;
    const { json } = await postRaw("/pipeline", body);
    expect((json as { result: unknown }[])[4]).toEqual({
      result: ["12345678901234567890", "1.50", "-2E3", "true"],
    });
  });

  it("numbers inside strings do not shift the number tokens", async () => {
    const body = `["eval", "return ARGV", 0, "1 \\" 2", 3.0, "4", -5]`;
    const { json } = await postRaw("/", body);
    expect(json).toEqual({ result: ['1 " 2', "3.0", "4", "-5"] });
  });

  it("accepts a 10 MB body on a kept-alive connection", async () => {
    const value = "x".repeat(10 * 1024 * 1024);
    const { status, json } = await postRaw(
      "/pipeline",
      JSON.stringify([
        ["set", key("10mb"), value],
        ["strlen", key("10mb")],
      ]),
    );
    expect(status).toBe(200);
    expect(json).toEqual([{ result: "OK" }, { result: value.length }]);
    const res = await fetch(new URL("/pipeline", inject("bridgeUrl")), {
      method: "POST",
      headers: { authorization: `Bearer ${inject("bridgeToken")}` },
      body: '[["ping"]]',
    });
    expect(res.headers.get("connection")).toBe("keep-alive");
    await res.body?.cancel();
  });

  it("ignores upstash-sync-token", async () => {
    const { status, json } = await postRaw("/", '["echo", "hi"]', {
      "upstash-sync-token": "whatever",
    });
    expect(status).toBe(200);
    expect(json).toEqual({ result: "hi" });
  });
});

describe("commands that would change or block the shared connection", () => {
  const refused: string[][] = [
    ["select", "1"],
    ["blpop", "k", "0"],
    ["BRPOP", "k", "1"],
    ["client", "setname", "x"],
    ["subscribe", "ch"],
    ["multi"],
    ["exec"],
    ["watch", "k"],
    ["hello", "3"],
    ["auth", "x"],
    ["monitor"],
    ["xread", "block", "0", "streams", "s", "$"],
    ["wait", "0", "0"],
    ["debug", "sleep", "5"],
    ["shutdown", "nosave"],
    ["flushall"],
    ["FLUSHDB", "ASYNC"],
    // Server-wide state, data placement, code and users. (Arguments chosen to do no harm should
    // the bridge ever let one through to the shared Redis.)
    ["swapdb", "0", "0"],
    ["replicaof", "no", "one"],
    ["SLAVEOF", "no", "one"],
    ["config", "get", "dir"],
    ["CONFIG", "SET", "dir", "."],
    ["migrate", "127.0.0.1", "1", "no-such-key", "0", "1"],
    ["module", "list"],
    ["acl", "whoami"],
    ["ACL", "SETUSER", "nobody-bridge-test"],
    ["save"],
    ["bgsave", "schedule"],
    ["bgrewriteaof"],
  ];

  it.each(refused.map((c) => [c.join(" "), c]))("%s is refused on /", async (_, command) => {
    const { status, json } = await postRaw("/", JSON.stringify(command));
    expect(status).toBe(400);
    expect((json as { error: string }).error).toContain(String(command[0]).toUpperCase());
  });

  it("gets a per-command error in a pipeline; the rest still run", async () => {
    const { status, json } = await postRaw(
      "/pipeline",
      JSON.stringify([
        ["set", key("r"), "1"],
        ["select", "2"],
        ["blpop", key("l"), "0"],
        ["get", key("r")],
      ]),
    );
    expect(status).toBe(200);
    expect(json).toEqual([
      { result: "OK" },
      { error: expect.stringContaining("SELECT") },
      { error: expect.stringContaining("BLPOP") },
      { result: "1" },
    ]);
    // The database was not switched under the other callers.
    expect(await redis.get(key("r"))).toBe(1);
  });

  it("makes the client reject, naming the command", async () => {
    await expect(redis.exec(["select", "1"])).rejects.toThrow(/SELECT/);
    await expect(redis.exec(["blpop", key("l"), "0"])).rejects.toThrow(/BLPOP/);
  });

  it("refuses a whole transaction that contains one", async () => {
    const { status, json } = await postRaw(
      "/multi-exec",
      JSON.stringify([
        ["set", key("t"), "1"],
        ["select", "1"],
      ]),
    );
    expect(status).toBe(400);
    expect((json as { error: string }).error).toContain("SELECT");
    expect(await redis.exists(key("t"))).toBe(0);
  });

  it("lets a non-blocking XREAD through", async () => {
    await redis.xadd(key("s"), "*", { f: "v" });
    const { status, json } = await postRaw(
      "/",
      JSON.stringify(["xread", "count", "1", "streams", key("s"), "0"]),
    );
    expect(status).toBe(200);
    expect(JSON.stringify(json)).toContain('"f","v"');
  });
});
