/**
 * A monthly token quota through the worker (docs/usage.md, docs/calendar-quotas.md): a
 * configured calendar usage rule, `/check` answering a receipt, `POST /check/settle` charging
 * or giving back what was used once (again 409), a 429 with Retry-After to the next period's
 * start, and a settle whose period has ended charging nothing (404). Real worker, real Redis
 * through the bridge.
 */
import { describe, expect, it } from "vitest";
import { periodAt } from "../../../src/limiter/calendar-period";
import { scopedPrefix, testRedis } from "../../support/worker/redis";
import { postCheck, workerWith } from "../../support/worker/worker-harness";

const prefix = scopedPrefix("check-settle-period");
const redis = testRedis();
const run = crypto.randomUUID().slice(0, 8);
const ANCHOR = "2026-01-15T09:00:00+01:00";
const worker = workerWith({
  LIMITER_CONFIG: JSON.stringify({
    prefix,
    rules: [
      {
        name: "tokens-month",
        period: "month",
        timezone: "Europe/Berlin",
        anchor: ANCHOR,
        limit: 5_000_000,
        cost: 4_000,
        usage: { json: "usage.total_tokens" },
        key: "header:x-api-key",
      },
    ],
  }),
});
const period = { unit: "month", timezone: "Europe/Berlin", anchor: Date.parse(ANCHOR) } as const;

interface Answer {
  allowed: boolean;
  remaining: number;
  reset: number;
  receipt?: string;
}

async function check(key: string): Promise<[number, Answer, Headers]> {
  const answer = await postCheck(worker, { key, rule: "tokens-month" });
  return [answer.status, (await answer.json()) as Answer, answer.headers];
}

const settle = async (receipt: string | undefined, usage: number) => {
  const answer = await postCheck(worker, { receipt, usage }, { path: "/check/settle" });
  return [answer.status, await answer.json()];
};

describe("a monthly token quota through /check and /check/settle", () => {
  it("reserves, settles once, and denies until the next period's start", async () => {
    const key = `month-${run}`;
    const [status, first] = await check(key);
    expect([status, first.remaining]).toEqual([200, 5_000_000 - 4_000]);
    // The receipt carries the period: still compact.
    expect(first.receipt?.length).toBeLessThan(400);
    // 2 500 used: 1 500 back.
    expect(await settle(first.receipt, 2_500)).toEqual([
      200,
      { settled: true, usage: 2_500, charged: [{ rule: "tokens-month", units: -1_500 }] },
    ]);
    expect((await settle(first.receipt, 2_500))[0]).toBe(409);
    // The next reservation sees exactly what was charged.
    const [, second] = await check(key);
    expect(second.remaining).toBe(5_000_000 - 2_500 - 4_000);
    // 4 996 000 used: 1 500 left, and a reservation of 4 000 waits for the next period.
    expect(await settle(second.receipt, 4_996_000)).toMatchObject([
      200,
      { charged: [{ rule: "tokens-month", units: 4_992_000 }] },
    ]);
    const [denied, answer, headers] = await check(key);
    expect([denied, answer.allowed, answer.remaining]).toEqual([429, false, 1_500]);
    const { end } = periodAt(period, Date.now());
    expect(answer.reset).toBe(end);
    const wait = Number(headers.get("Retry-After"));
    expect(Math.abs(wait - (end - Date.now()) / 1_000)).toBeLessThan(60);
  });

  it("a settle after its period ended charges nothing: 404", async () => {
    const key = `ended-${run}`;
    const counts = () => redis.keys(`${prefix}:tokens-month/calendar:{*}`);
    const before = await counts();
    const [, admitted] = await check(key);
    // (A header-keyed rule's key is hashed: the count this check wrote is the new one.)
    const stored = (await counts()).find((name) => !before.includes(name)) as string;
    expect(await redis.get(stored)).toMatch(/:4000$/);
    // What the next period's first admission writes over this one, without waiting a month.
    const { end } = periodAt(period, Date.now());
    await redis.set(stored, `${end}:${end}:7`);
    const [status, body] = await settle(admitted.receipt, 1);
    expect(status).toBe(404);
    expect(body).toMatchObject({ status: 404 });
    expect(await redis.get(stored)).toBe(`${end}:${end}:7`);
    await redis.del(stored);
  });
});
