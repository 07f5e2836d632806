/**
 * /check with usage and POST /check/settle (docs/usage.md): a receipt for each admitted usage
 * request, its usage charged once (again 409, unknown 404), every bad input a 400 naming the
 * field with nothing counted. Real worker, real Redis through the bridge.
 */
import { describe, expect, it } from "vitest";
import { adhocPolicyName } from "../../../src/http/check-request";
import { storageKey } from "../../../src/store/keys";
import { scopedPrefix, testRedis } from "../../support/worker/redis";
import { workerWith } from "../../support/worker/worker-harness";

const prefix = scopedPrefix("check-settle");
const redis = testRedis();
const run = crypto.randomUUID().slice(0, 8);
const worker = workerWith({
  LIMITER_CONFIG: JSON.stringify({
    prefix,
    rules: [
      {
        name: "tokens",
        limit: 1_000_000_000_000,
        window: "1m",
        key: "header:x-customer",
        cost: 1_000,
        usage: { json: ["usage.input_tokens", "usage.output_tokens"] },
      },
      { name: "plain", limit: 10, window: "1m" },
    ],
  }),
});
const other = workerWith({
  LIMITER_CONFIG: JSON.stringify({ prefix, rules: [] }),
  LIMITER_TOKEN: "another-token",
});

const post = (path: string, body: unknown, on = worker, token = "test-limiter-token") =>
  on(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });

async function admitted(body: Record<string, unknown>): Promise<string> {
  const answer = await post("/check", body);
  expect(answer.status).toBe(200);
  const json = (await answer.json()) as { receipt?: string };
  expect(typeof json.receipt).toBe("string");
  return json.receipt as string;
}

const remainingOf = async (body: Record<string, unknown>) =>
  ((await (await post("/check", { ...body, cost: 1 })).json()) as { remaining: number }).remaining;

describe("POST /check/settle", () => {
  it("charges what was used beyond the reservation, or gives the rest back, once", async () => {
    const key = `k1-${run}`;
    const body = { key, limit: 100, window: "1m", cost: 20, usage: true };
    const receipt = await admitted(body);
    expect(await remainingOf(body)).toBe(79);
    const settled = await post("/check/settle", { receipt, usage: 35 });
    expect(settled.status).toBe(200);
    expect(await settled.json()).toMatchObject({ settled: true, usage: 35 });
    // 35 + the probe's 1 + the next probe's 1.
    expect(await remainingOf(body)).toBe(63);
    const again = await post("/check/settle", { receipt, usage: 0 });
    expect(again.status).toBe(409);
    expect(await remainingOf(body)).toBe(62);

    const small = await admitted(body);
    expect((await post("/check/settle", { receipt: small, usage: 2 })).status).toBe(200);
    // 20 reserved, 2 used: 18 back (and 1 more for this probe).
    expect(await remainingOf(body)).toBe(59);
  });

  it("a configured usage rule answers a receipt; its RateLimit headers count units", async () => {
    const answer = await post("/check", { key: `k2-${run}`, rule: "tokens" });
    expect(answer.status).toBe(200);
    const json = (await answer.json()) as { receipt?: string; remaining: number };
    expect(json.remaining).toBe(1_000_000_000_000 - 1_000);
    // Compact: the rule, the key, the counts and the MAC.
    expect(json.receipt?.length).toBeLessThan(300);
    expect(answer.headers.get("RateLimit")).toContain(`r=${1_000_000_000_000 - 1_000}`);
    const settled = await post("/check/settle", { receipt: json.receipt, usage: 250_000 });
    expect(await settled.json()).toMatchObject({
      settled: true,
      charged: [{ rule: "tokens", units: 249_000 }],
    });
    const after = await post("/check", { key: `k2-${run}`, rule: "tokens" });
    expect(((await after.json()) as { remaining: number }).remaining).toBe(
      1_000_000_000_000 - 251_000,
    );
  });

  it("every bad input is a 400 naming the field, and nothing is counted", async () => {
    const key = `k3-${run}`;
    const body = { key, limit: 100, window: "1m", cost: 10, usage: true };
    const receipt = await admitted(body);
    const bad: [unknown, string][] = [
      [{ receipt, usage: -1 }, "usage"],
      [{ receipt, usage: 1.5 }, "usage"],
      [{ receipt, usage: "5" }, "usage"],
      [{ receipt, usage: 1_000_000_000_001 }, "usage"],
      [{ receipt }, "usage"],
      [{ usage: 5 }, "receipt"],
      [{ receipt: 42, usage: 5 }, "receipt"],
      // One character of the MAC changed, well inside it: its last one carries bits a decoder
      // may drop, so "…xx" at the end can seal the same bytes.
      [
        {
          receipt: `${receipt.slice(0, -5)}${receipt.at(-5) === "A" ? "B" : "A"}${receipt.slice(-4)}`,
          usage: 5,
        },
        "receipt",
      ],
      [{ receipt: "nope", usage: 5 }, "receipt"],
      [{ receipt, usage: 5, extra: 1 }, "extra"],
      [[receipt], "body"],
    ];
    for (const [given, field] of bad) {
      const answer = await post("/check/settle", given);
      expect(answer.status, JSON.stringify(given)).toBe(400);
      expect(((await answer.json()) as { field: string }).field).toBe(field);
    }
    // A receipt of another deployment (another token seals them) is not this one's.
    const foreign = await post("/check/settle", { receipt, usage: 5 }, other, "another-token");
    expect(foreign.status).toBe(400);
    // Nothing was counted: the reservation of 10 stands, and the receipt still settles once.
    expect(await remainingOf(body)).toBe(89);
    expect((await post("/check/settle", { receipt, usage: 0 })).status).toBe(200);
    expect(await remainingOf(body)).toBe(98);
    expect((await post("/check/settle", { receipt, usage: 0 }, worker, "wrong")).status).toBe(401);
  });

  it("a usage check refused, or /check bodies with usage wrong, name the field", async () => {
    const usage = async (body: unknown) => {
      const answer = await post("/check", body);
      return [answer.status, ((await answer.json()) as { field?: string }).field];
    };
    expect(await usage({ key: "x", limit: 10, window: "1m", usage: "yes" })).toEqual([
      400,
      "usage",
    ]);
    expect(
      await usage({ key: "x", limit: 10, window: "1m", usage: true, algorithm: "fixed-window" }),
    ).toEqual([400, "usage"]);
    expect(await usage({ key: "x", rule: "plain", usage: true })).toEqual([400, "usage"]);
    // A usage limit may reach 10^12; a plain one stays within the ring's cap.
    expect(await usage({ key: "x", limit: 1_000_000_000_000, window: "1m" })).toEqual([
      400,
      "limit",
    ]);
    const full = await post("/check", {
      key: `k4-${run}`,
      limit: 5,
      window: "1m",
      cost: 5,
      usage: true,
    });
    expect(full.status).toBe(200);
    const denied = await post("/check", { key: `k4-${run}`, limit: 5, window: "1m", usage: true });
    expect(denied.status).toBe(429);
    expect(await denied.json()).not.toHaveProperty("receipt");
  });

  it("a receipt of nothing left to settle (its log expired with the window) is a 404", async () => {
    const key = `k5-${run}`;
    const receipt = await admitted({ key, limit: 10, window: "1m", usage: true });
    // What the key's expiry at the window's end does, without waiting for it.
    const policy = adhocPolicyName(60_000, 10);
    expect(await redis.del(storageKey(prefix, policy, key, "sliding-log-weighted"))).toBe(1);
    const answer = await post("/check/settle", { receipt, usage: 3 });
    expect(answer.status).toBe(404);
    expect(await remainingOf({ key, limit: 10, window: "1m", usage: true })).toBe(9);
  });
});
