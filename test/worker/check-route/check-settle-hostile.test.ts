/**
 * POST /check/settle against hostile and careless callers: receipts altered, truncated, huge or
 * with foreign characters, settles of one receipt racing each other, a /check retried under its
 * requestId, and a caller who holds the /check token (LIMITER_TOKEN) and reads the source, who
 * would seal a receipt of its own for any key and any member id were the MAC keyed by that
 * token. Member ids are an isolate's prefix and a counter (src/limiter/member-id.ts): a caller's
 * own receipt shows the prefix and its neighbours' ids. Real worker, real Redis through the bridge.
 */
import { describe, expect, it } from "vitest";
import { storageKey } from "../../../src/store/keys";
import { scopedPrefix, testRedis } from "../../support/worker/redis";
import { postCheck, TEST_LIMITER_TOKEN, workerWith } from "../../support/worker/worker-harness";

const prefix = scopedPrefix("settle-hostile");
const run = crypto.randomUUID().slice(0, 8);
const redis = testRedis();
const pad2 = (i: number) => String(i).padStart(2, "0");
const worker = workerWith({ LIMITER_CONFIG: JSON.stringify({ prefix, rules: [] }) });

const post = (path: string, body: unknown) =>
  worker(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${TEST_LIMITER_TOKEN}` },
    body: JSON.stringify(body),
  });

const b64 = (bytes: Uint8Array) =>
  btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
const unb64 = (text: string) =>
  Uint8Array.from(atob(text.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));

type Sealed = {
  k: string[];
  g: [string, string, number, [string, number, number, number, number][]][];
};

/** A receipt sealed as usage-receipt.ts seals them, with the token every /check caller has. */
async function forge(sealed: Sealed, token: string): Promise<string> {
  const body = b64(new TextEncoder().encode(JSON.stringify(sealed)));
  const key = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(`edge-limiter usage receipt\n${token}`),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const mac = await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(body));
  return `${body}.${b64(new Uint8Array(mac))}`;
}

async function receiptFor(key: string): Promise<string> {
  const answer = await post("/check", { key, limit: 100, window: "1m", cost: 50, usage: true });
  expect(answer.status).toBe(200);
  return ((await answer.json()) as { receipt: string }).receipt;
}

const remaining = async (key: string) =>
  (
    (await (
      await post("/check", { key, limit: 100, window: "1m", cost: 1, usage: true })
    ).json()) as {
      remaining: number;
    }
  ).remaining;

describe("POST /check/settle: a receipt the caller sealed itself", () => {
  // Every /check caller holds the /check token: a seal keyed by it alone would let one of them
  // seal a receipt naming another customer's key and a member id next to its own (ids are an
  // isolate prefix and a counter) and settle it at 0, giving back the victim's reservation.
  // Receipts are sealed with a secret no caller holds (worker/shard-stores.ts receiptSecretOf).
  it("refuses (400 naming receipt) a receipt sealed with the /check token", async () => {
    const attacker = await receiptFor(`attacker-${run}`);
    const victim = await receiptFor(`victim-${run}`);
    const mine = JSON.parse(
      new TextDecoder().decode(unb64(attacker.split(".")[0] as string)),
    ) as Sealed;
    const [shard, memberId, at, rules] = mine.g[0] as Sealed["g"][number];
    // The next id this isolate handed out: the victim's.
    const isolate = memberId.slice(0, 12);
    const next = `${isolate}${(Number.parseInt(memberId.slice(12), 36) + 1).toString(36)}`;
    const forged = await forge(
      { k: [`victim-${run}`], g: [[shard, next, at, rules]] },
      TEST_LIMITER_TOKEN,
    );
    const settled = await post("/check/settle", { receipt: forged, usage: 0 });
    expect(settled.status, await settled.clone().text()).toBe(400);
    expect(((await settled.json()) as { field?: string }).field).toBe("receipt");
    // The victim's reservation stands until its own receipt settles it.
    expect(await remaining(`victim-${run}`)).toBe(49);
    expect((await post("/check/settle", { receipt: victim, usage: 30 })).status).toBe(200);
  });
});

describe("POST /check/settle: odd receipts and racing settles", () => {
  it("settles a receipt once when eight settles of it race", async () => {
    const receipt = await receiptFor(`race-${run}`);
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => post("/check/settle", { receipt, usage: i + 1 })),
    );
    const statuses = answers.map((answer) => answer.status).sort();
    expect(statuses).toEqual([200, 409, 409, 409, 409, 409, 409, 409]);
    const won = answers.find((answer) => answer.status === 200) as Response;
    const { usage } = (await won.json()) as { usage: number };
    // What the winner said it charged, and nothing of the others: 100 − usage − this probe.
    expect(await remaining(`race-${run}`)).toBe(100 - usage - 1);
  });

  it("refuses altered, truncated, huge and foreign-character receipts: 400 naming receipt", async () => {
    const receipt = await receiptFor(`odd-${run}`);
    const [body, mac] = receipt.split(".") as [string, string];
    const odd = [
      `${receipt}.`,
      `${receipt}\u0000`,
      `${receipt.slice(0, -1)}é`,
      `.${mac}`,
      `${body}.`,
      `${body.slice(0, -4)}.${mac}`,
      `${body}=.${mac}`,
      "é".repeat(3_000),
      "a".repeat(6_001),
    ];
    for (const given of odd) {
      const answer = await post("/check/settle", { receipt: given, usage: 1 });
      expect(answer.status, given.slice(0, 40)).toBe(400);
      expect(((await answer.json()) as { field: string }).field).toBe("receipt");
    }
    // Nothing was counted by them: the receipt still settles, once.
    expect(await remaining(`odd-${run}`)).toBe(49);
    expect((await post("/check/settle", { receipt, usage: 0 })).status).toBe(200);
  });

  it("a receipt of a key reset since is a 404, and charges nothing to its new window", async () => {
    const key = `reset-${run}`;
    const receipt = await receiptFor(key);
    const reset = await postCheck(
      worker,
      { key, limit: 100, window: "1m", usage: true },
      { path: "/check/reset" },
    );
    expect(await reset.json()).toMatchObject({ reset: true, existed: true });
    const fresh = await receiptFor(key);
    expect((await post("/check/settle", { receipt, usage: 90 })).status).toBe(404);
    // Only the new admission's 50 and this probe's 1.
    expect(await remaining(key)).toBe(49);
    expect((await post("/check/settle", { receipt: fresh, usage: 0 })).status).toBe(200);
  });

  it("settles the longest receipt /check hands out: 16 usage rules, a key of escapes", async () => {
    // What makes a receipt longest: the most rules a /check names, each with the longest name,
    // limit, window and cost, and the longest key, every character of it escaped in JSON.
    const names = Array.from({ length: 16 }, (_, i) => `${"r".repeat(62)}${pad2(i)}`);
    const rules = names.map((name) => ({
      name,
      limit: 1_000_000_000_000,
      window: "7d",
      cost: 999_999_999_999,
      key: "ip",
      usage: { json: "usage.total_tokens" },
    }));
    const widest = workerWith({ LIMITER_CONFIG: JSON.stringify({ prefix, rules }) });
    const key = `${run}${"\u0001".repeat(504)}`;
    try {
      const checked = await postCheck(widest, { key, rules: names });
      expect(checked.status).toBe(200);
      const { receipt } = (await checked.json()) as { receipt: string };
      // Before: past the 6 000 characters /check/settle took, refused as not a receipt.
      expect(receipt.length).toBeGreaterThan(6_000);
      const settled = await postCheck(widest, { receipt, usage: 0 }, { path: "/check/settle" });
      expect(settled.status, await settled.clone().text()).toBe(200);
    } finally {
      for (const name of names) {
        await redis.del(storageKey(prefix, name, key, "sliding-log-weighted"));
      }
    }
  });

  // BUG (medium for /check callers that retry): a /check retried under its requestId (the
  // first answer lost: the one reason to retry) is replayed allowed, but with no receipt: the
  // decision of a replay carries none (limiter/decisions.ts fromEvaluation gives one only to an
  // admission counted now). The caller cannot settle, so its reservation stands whatever it
  // used: under-charged past it, over-charged below it. The id's record names the original
  // member (a replay's slot uses it), enough for a receipt; not local to src/http: left failing.
  it.fails("answers a /check replayed under its requestId with a receipt that settles", async () => {
    const body = {
      key: `replay-${run}`,
      limit: 100,
      window: "1m",
      cost: 50,
      usage: true,
      requestId: `id-${run}`,
    };
    expect((await post("/check", body)).status).toBe(200);
    const retried = await post("/check", body);
    expect(retried.status).toBe(200);
    const { receipt } = (await retried.json()) as { receipt?: string };
    expect(typeof receipt).toBe("string");
    expect((await post("/check/settle", { receipt, usage: 80 })).status).toBe(200);
    expect(await remaining(`replay-${run}`)).toBe(100 - 80 - 1);
  });
});
