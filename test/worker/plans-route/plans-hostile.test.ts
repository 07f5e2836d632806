/**
 * The plans admin routes against input built to hurt (docs/hostile-input.md): every refusal a 4xx
 * problem+json naming the field with nothing written, every accepted spelling stored and listed
 * in one normalized form, and the store's hashes bounded in entries and in bytes.
 */
import { describe, expect, it } from "vitest";
import { headerRuleKey } from "../../../src/rules/client-key";
import { encodeKeyPart } from "../../../src/store/keys";
import {
  MAX_NETWORK_BLOCKS,
  MAX_PLAN_BYTES,
  MAX_PLAN_ENTRIES,
  networkBlocksKey,
  PAGE_BYTES,
  PLAN_BYTES_FIELD,
  plansKey,
} from "../../../src/store/plans";
import { scopedPrefix, testRedis } from "../../support/worker/redis";
import {
  type CheckPath,
  postCheck,
  TEST_ADMIN_TOKEN,
  workerWith,
} from "../../support/worker/worker-harness";

const redis = testRedis();
const run = crypto.randomUUID().slice(0, 8);

function setup(label: string) {
  const prefix = scopedPrefix(label);
  const config = {
    prefix,
    networkBlocks: true,
    rules: [
      {
        name: "api",
        match: { path: "/api/*" },
        limit: 3,
        window: "1m",
        key: "header:x-api-key",
        overrides: true,
      },
      { name: "web", match: { path: "/web/*" }, limit: 3, window: "1m", overrides: true },
      { name: "open", match: { path: "/open/*" }, limit: 100, window: "1m" },
    ],
  };
  let isolates = 0;
  // Each distinct LIMITER_CONFIG text is its own runtime: a fresh isolate with its own copy.
  const isolate = () => workerWith({ LIMITER_CONFIG: JSON.stringify(config, null, isolates++) });
  const worker = isolate();
  const post = (path: CheckPath, body: unknown) => postCheck(worker, body, { path });
  const list = (query: string) =>
    worker(`/check/plans?${query}`, { headers: { Authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });
  /** Both hashes as stored: a refused request must leave them as they were. */
  const stored = async () => ({
    plans: (await redis.hgetall(plansKey(prefix))) ?? {},
    blocks: (await redis.hgetall(networkBlocksKey(prefix))) ?? {},
  });
  return { prefix, isolate, worker, post, list, stored };
}

const raw = (worker: ReturnType<typeof workerWith>, path: string, body: string) =>
  worker(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    body,
  });

describe("hostile bodies", () => {
  const { worker, post, list, stored } = setup("ph-bodies");

  it("each is a 4xx problem+json naming the field, never a 5xx, and writes nothing", async () => {
    const cases: [path: CheckPath, body: unknown, field: string][] = [
      ["/check/override", { rule: "api", key: "k", limit: -1 }, "limit"],
      ["/check/override", { rule: "api", key: "k", limit: 1e12 }, "limit"],
      ["/check/override", { rule: "api", key: "k", limit: 2.5 }, "limit"],
      ["/check/override", { rule: "api", key: "k", limit: "5" }, "limit"],
      ["/check/override", { rule: "api", key: "k", limit: true }, "limit"],
      ["/check/override", { rule: "nope", key: "k", limit: 5 }, "rule"],
      ["/check/override", { rule: 7, key: "k", limit: 5 }, "rule"],
      ["/check/override", { rule: "open", key: "k", limit: 5 }, "rule"],
      ["/check/override", { rule: "api", key: { k: 1 }, limit: 5 }, "key"],
      // A lone surrogate cannot be keyed faithfully (a header's hash folds it into U+FFFD).
      ["/check/override", { rule: "api", key: "a\ud800", limit: 5 }, "key"],
      ["/check/block", { rule: "web", key: "\udc00" }, "key"],
      ["/check/block", { "\ud800": 1 }, "body"],
      ["/check/block", { ip: "192.0.2.1", seconds: -1 }, "seconds"],
      ["/check/block", { ip: "192.0.2.1", seconds: 1e12 }, "seconds"],
      ["/check/block", { ip: "192.0.2.1", seconds: 1.5 }, "seconds"],
      ["/check/block", { ip: "192.0.2.1", country: "DE" }, "key"],
      ["/check/unblock", { ip: "192.0.2.1", seconds: 5 }, "seconds"],
      ...[
        "10.0.0.0/33",
        "::ffff:192.0.2.4/24", // IPv4-mapped: its length is IPv6's (97 to 128)
        "::ffff:192.0.2.4/129",
        "1.2.3",
        "010.0.0.1",
        " 192.0.2.1",
        "2001:db8::1 ",
        "\t2001:db8::/32",
        "fe80::1%eth0",
        "[2001:db8::1]",
        "0.0.0.0/0",
        "::/0",
        "192.0.2.1/024",
        "192.0.2.1/",
        "192.0.2.0/24/8",
        "2001:db8::/64\n",
        "",
      ].map((ip): [CheckPath, unknown, string] => ["/check/block", { ip }, "ip"]),
      ["/check/block", { ip: 3_221_225_985 }, "ip"],
      ...["USA", "U.S.", "UK", "EL", "ZZ", "u", "", " us", "DEU"].map(
        (country): [CheckPath, unknown, string] => ["/check/block", { country }, "country"],
      ),
      ...["AS 13335", "AS-13335", "013335", "AS", "", "1e3", 4_294_967_296, -1, 0, 1.5, "0"].map(
        (asn): [CheckPath, unknown, string] => ["/check/block", { asn }, "asn"],
      ),
    ];
    for (const [path, body, field] of cases) {
      const res = await post(path, body);
      const label = `${path} ${JSON.stringify(body)}`;
      expect(res.status, label).toBe(400);
      expect(res.headers.get("Content-Type"), label).toBe("application/problem+json");
      expect(await res.json(), label).toMatchObject({ status: 400, field });
    }
    // Bodies built to cost: 4 000 levels of nesting, and one past the 8 KiB cap.
    const deep = `${"[".repeat(4_000)}${"]".repeat(4_000)}`;
    for (const [body, status, field] of [
      [deep, 400, "body"],
      [`{"rule": "api", "key": ${deep}, "limit": 1}`, 400, "key"],
      [`{"rule": "api", "key": "k", "limit": 1, "pad": "${"x".repeat(9_000)}"}`, 413, undefined],
      ["{", 400, "body"],
      ['{"rule": "api", "key": "k", "limit": 1, "__proto__": {"limit": 5}}', 400, "__proto__"],
    ] as const) {
      const res = await raw(worker, "/check/override", body);
      expect(res.status, body.slice(0, 30)).toBe(status);
      expect(res.headers.get("Content-Type")).toBe("application/problem+json");
      if (field) expect(await res.json()).toMatchObject({ field });
    }
    // Listing: a cursor past HSCAN's 2^64 - 1 is the caller's error, not the store's (was a 503).
    for (const query of [
      "cursor=18446744073709551616",
      "cursor=99999999999999999999",
      "cursor=-1",
      "count=0",
      "count=1001",
      "what=all",
      "rule=nope",
    ]) {
      const res = await list(query);
      expect(res.status, query).toBe(400);
      expect(await res.json(), query).toMatchObject({ field: query.split("=")[0] });
    }
    expect((await list("cursor=18446744073709551615")).status).toBe(200);
    expect(await stored()).toEqual({ plans: {}, blocks: {} });
  });
});

describe("accepted spellings", () => {
  const { post, list, stored, isolate } = setup("ph-spell");

  it("each is stored once in its normalized form, answered and listed so; a second spelling is the same entry", async () => {
    const spellings: [body: Record<string, unknown>, kind: string, value: string][] = [
      [{ ip: "10.0.0.1/8" }, "ip", "10.0.0.0/8"], // host bits cleared: the answer says so
      [{ ip: "10.9.8.7/8" }, "ip", "10.0.0.0/8"],
      [{ ip: "::ffff:198.51.100.7/120" }, "ip", "198.51.100.0/24"],
      [{ ip: "198.51.100.0/24" }, "ip", "198.51.100.0/24"],
      [{ ip: "::FFFF:C633:6407" }, "ip", "198.51.100.7"],
      [{ ip: "2001:DB8:0:0:0:0:0:AB" }, "ip", "2001:db8::ab"],
      [{ ip: "2001:db8::ab/128" }, "ip", "2001:db8::ab"],
      [{ ip: "2001:0db8:00ff::/40" }, "ip", "2001:db8::/40"],
      [{ country: "us" }, "country", "US"],
      [{ country: "US" }, "country", "US"],
      [{ country: "t1" }, "country", "T1"],
      [{ country: "XX" }, "country", "XX"],
      [{ asn: "AS13335" }, "asn", "13335"],
      [{ asn: "as13335" }, "asn", "13335"],
      [{ asn: 13_335 }, "asn", "13335"],
      [{ asn: "4294967295" }, "asn", "4294967295"],
    ];
    const seen = new Set<string>();
    for (const [body, kind, value] of spellings) {
      const res = await post("/check/block", body);
      expect(res.status, JSON.stringify(body)).toBe(200);
      expect(await res.json(), JSON.stringify(body)).toEqual({
        ok: true,
        existed: seen.has(`${kind}|${value}`),
        [kind]: value,
        rule: null,
      });
      seen.add(`${kind}|${value}`);
    }
    const page = await (await list("what=network&count=1000")).json<{
      cursor: string;
      entries: { by: string; value: string }[];
    }>();
    expect(page.cursor).toBe("0");
    expect(page.entries.map((entry) => `${entry.by}|${entry.value}`).sort()).toEqual(
      [...seen].sort(),
    );
    expect(Object.keys((await stored()).blocks)).toHaveLength(seen.size);
    // The stored forms are the ones requests are matched by: a fresh isolate refuses these.
    const fresh = isolate();
    for (const [ip, status] of [
      ["10.200.0.1", 403],
      ["198.51.100.99", 403],
      ["2001:db8::ab", 403],
      ["11.0.0.1", 200],
    ] as const) {
      const res = await fresh(`/open/${run}`, { headers: { "CF-Connecting-IP": ip } });
      expect(res.status, ip).toBe(status);
    }
    const tor = await fresh(`/open/${run}`, {
      headers: { "CF-Connecting-IP": "192.0.2.1" },
      cf: { country: "T1" },
    } as RequestInit);
    expect(await tor.json()).toMatchObject({ blocked: { by: "country", value: "T1" } });
  });

  it("a key with unusual characters is stored encoded and listed as it was given", async () => {
    const keys = ["\u0000", "a|b", "%41", "\u202eevil", "😀", "o|web|x", "語".repeat(512)];
    for (const key of keys) {
      expect((await post("/check/override", { rule: "web", key, limit: 4 })).status, key).toBe(200);
    }
    // Longer than 512 characters: counted, and so stored, under its SHA-256.
    const long = "語".repeat(513);
    expect((await post("/check/override", { rule: "web", key: long, limit: 4 })).status).toBe(200);
    const page = await (await list("what=overrides&rule=web&count=1000")).json<{
      entries: { value: string }[];
    }>();
    const values = page.entries.map((entry) => entry.value);
    expect(values.filter((value) => !value.startsWith("#sha256:")).sort()).toEqual(keys.sort());
    expect(values.filter((value) => value.startsWith("#sha256:"))).toHaveLength(1);
  });

  it("removing what is not there answers 200 with existed false, for every kind, and writes nothing", async () => {
    const before = await stored();
    for (const [path, body] of [
      ["/check/unblock", { rule: "api", key: `never-${run}` }],
      ["/check/unblock", { key: `never-${run}` }],
      ["/check/unblock", { ip: "203.0.113.0/25" }],
      ["/check/unblock", { country: "FR", rule: "web" }],
      ["/check/unblock", { asn: "AS64511" }],
      ["/check/override", { rule: "web", key: `never-${run}`, limit: null }],
    ] as const) {
      const res = await post(path, body);
      expect(res.status, JSON.stringify(body)).toBe(200);
      expect(await res.json(), JSON.stringify(body)).toMatchObject({ ok: true, existed: false });
    }
    expect(await stored()).toEqual(before);
  });
});

describe("bounds of the plans hash", () => {
  const { prefix, post, list, isolate } = setup("ph-bounds");
  const hash = plansKey(prefix);

  it(`${MAX_PLAN_ENTRIES} overrides: a new one is 409, a change or removal passes, the decision reads its own, a page is bounded`, async () => {
    const customer = `customer-${run}`;
    expect((await post("/check/override", { rule: "api", key: customer, limit: 9 })).status).toBe(
      200,
    );
    // The rest written straight into Redis (the route would take minutes): the same fields the
    // route writes, header-keyed (o|api|<64 hex>), and the byte count as the route keeps it.
    const filled = await redis.eval<[string, string], number>(
      `local n, counted = tonumber(ARGV[1]), 0
       for i = 1, n do
         local field = 'o|api|' .. string.format('%064x', i)
         redis.call('HSET', KEYS[1], field, ARGV[2])
         counted = counted + #field + #ARGV[2]
       end
       redis.call('HINCRBY', KEYS[1], '${PLAN_BYTES_FIELD}', counted)
       return redis.call('HLEN', KEYS[1]) - 1`,
      [hash],
      [String(MAX_PLAN_ENTRIES - 1), "10000"],
    );
    expect(filled).toBe(MAX_PLAN_ENTRIES);
    const refused = await post("/check/override", { rule: "web", key: `new-${run}`, limit: 5 });
    expect(refused.status).toBe(409);
    expect(refused.headers.get("Content-Type")).toBe("application/problem+json");
    expect(await refused.json()).toMatchObject({
      detail: expect.stringContaining(`${MAX_PLAN_ENTRIES} overrides and key blocks`),
    });
    expect(await redis.hexists(hash, `o|web|new-${run}`)).toBe(0);
    // A key block is a field of the same hash: refused too.
    expect((await post("/check/block", { rule: "web", key: `new-${run}` })).status).toBe(409);
    // A change of an existing one passes, and the decision's HMGET finds it among 100 000.
    const changed = await post("/check/override", { rule: "api", key: customer, limit: 6 });
    expect(await changed.json()).toMatchObject({ ok: true, existed: true });
    const decided = await isolate()(`/api/${run}`, { headers: { "x-api-key": customer } });
    expect(decided.headers.get("RateLimit-Policy")).toBe('"api";q=6;w=60');
    // A page: about `count` entries (HSCAN's COUNT is a hint), far below the whole hash.
    let cursor = "0";
    for (let page = 0; page < 3; page++) {
      const res = await list(`what=overrides&count=1000&cursor=${cursor}`);
      const text = await res.text();
      const body = JSON.parse(text) as { cursor: string; entries: unknown[] };
      console.log(`page ${page}: ${body.entries.length} entries, ${text.length} bytes`);
      expect(body.entries.length).toBeGreaterThan(0);
      expect(body.entries.length).toBeLessThanOrEqual(1_100);
      expect(body.cursor).not.toBe("0");
      cursor = body.cursor;
    }
    // A removal passes, and makes room for one new entry.
    const removed = await post("/check/override", { rule: "api", key: customer, limit: null });
    expect(await removed.json()).toMatchObject({ ok: true, existed: true });
    // A key blocked in every rule is a field in each (api and web): one slot is not enough, and
    // neither is written (they were written one by one, the first kept, before).
    const everywhere = `everywhere-${run}`;
    expect((await post("/check/block", { key: everywhere })).status).toBe(409);
    expect(await redis.hexists(hash, `b|web|${everywhere}`)).toBe(0);
    expect(await redis.hexists(hash, `b|api|${await headerRuleKey(everywhere)}`)).toBe(0);
    expect(
      (await post("/check/override", { rule: "web", key: `new-${run}`, limit: 5 })).status,
    ).toBe(200);
    await redis.del(hash);
  });

  it("bytes: long keys are counted by their stored size, a write past the budget is 409, a removal or a smaller value passes", async () => {
    // 512 characters outside ASCII: the longest key kept as is, ~4.6 kB once encoded.
    const long = "語".repeat(512);
    const field = `o|web|${encodeKeyPart(long)}`;
    expect((await post("/check/override", { rule: "web", key: long, limit: 100 })).status).toBe(
      200,
    );
    expect(Number(await redis.hget(hash, PLAN_BYTES_FIELD))).toBe(field.length + 3);
    // A header rule's key is its SHA-256: 64 characters, whatever was sent.
    await post("/check/block", { rule: "api", key: long });
    const blockField = `b|api|${await headerRuleKey(long)}`;
    expect(Number(await redis.hget(hash, PLAN_BYTES_FIELD))).toBe(
      field.length + 3 + blockField.length + 1,
    );
    expect((await post("/check/unblock", { rule: "api", key: long })).status).toBe(200);
    // As if the hash held the budget less 100 bytes: a long key does not fit, a short one does.
    await redis.hset(hash, { [PLAN_BYTES_FIELD]: MAX_PLAN_BYTES - 100 });
    // (Another 512-character key: a longer one would be counted, and stored, as its digest.)
    const other = `${long.slice(1)}!`;
    const refused = await post("/check/override", { rule: "web", key: other, limit: 5 });
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ detail: expect.stringContaining("bytes") });
    expect((await post("/check/override", { rule: "web", key: "k", limit: 5 })).status).toBe(200);
    // The same value's length, or a smaller one, on an existing field passes at the budget.
    expect((await post("/check/override", { rule: "web", key: long, limit: 7 })).status).toBe(200);
    expect((await post("/check/override", { rule: "web", key: long, limit: null })).status).toBe(
      200,
    );
    expect(Number(await redis.hget(hash, PLAN_BYTES_FIELD))).toBe(
      MAX_PLAN_BYTES - 100 + 8 - (field.length + 3),
    );
    // A block that has ended is deleted by the listing that passes it, its bytes taken off.
    const ended = `b|web|ended-${run}`;
    await redis.hset(hash, { [ended]: "1" });
    await redis.hincrby(hash, PLAN_BYTES_FIELD, ended.length + 1);
    expect(
      (await (await list("what=blocks&rule=web")).json<{ entries: unknown[] }>()).entries,
    ).toEqual([]);
    expect(await redis.hexists(hash, ended)).toBe(0);
    expect(Number(await redis.hget(hash, PLAN_BYTES_FIELD))).toBe(
      MAX_PLAN_BYTES - 100 + 8 - (field.length + 3),
    );
    // A listing page stops gathering at PAGE_BYTES: 400 such keys (1.8 MB) take more than a page.
    await redis.del(hash);
    await redis.eval(
      `for i = 1, 400 do redis.call('HSET', KEYS[1], 'o|web|' .. i .. ARGV[1], '1') end`,
      [hash],
      [encodeKeyPart(long)],
    );
    const res = await list("what=overrides&count=1000");
    const text = await res.text();
    const page = JSON.parse(text) as { cursor: string; entries: unknown[] };
    console.log(`long keys: ${page.entries.length} entries, ${text.length} bytes`);
    expect(page.cursor).not.toBe("0");
    expect(page.entries.length).toBeLessThan(400);
    expect(text.length).toBeLessThan(PAGE_BYTES + 100 * (field.length + 100));
    await redis.del(hash);
  });

  it(`${MAX_NETWORK_BLOCKS} network blocks: a new one is 409, an existing one passes, a fresh isolate matches them`, async () => {
    const blocks = networkBlocksKey(prefix);
    await redis.eval(
      `for i = 0, tonumber(ARGV[1]) - 1 do
         redis.call('HSET', KEYS[1], 'ip|*|10.' .. math.floor(i / 256) .. '.' .. (i % 256) .. '.0/24', '0')
       end`,
      [blocks],
      [String(MAX_NETWORK_BLOCKS)],
    );
    const refused = await post("/check/block", { ip: "192.0.2.0/24" });
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({
      detail: `the store holds ${MAX_NETWORK_BLOCKS} network blocks already, the most it takes: remove some first`,
    });
    expect(await redis.hexists(blocks, "ip|*|192.0.2.0/24")).toBe(0);
    expect(await (await post("/check/block", { ip: "10.0.5.9/24" })).json()).toMatchObject({
      existed: true,
    });
    const fresh = isolate();
    const at = (ip: string) => fresh(`/open/${run}`, { headers: { "CF-Connecting-IP": ip } });
    expect((await at("10.39.15.1")).status).toBe(403);
    expect((await at("10.40.0.1")).status).toBe(200);
    expect((await post("/check/unblock", { ip: "10.0.0.0/24" })).status).toBe(200);
    expect((await post("/check/block", { ip: "192.0.2.0/24" })).status).toBe(200);
    await redis.del(blocks);
  });
});
