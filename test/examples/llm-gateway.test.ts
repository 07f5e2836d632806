// The LLM gateway example (examples/llm-gateway/app.ts) in workerd, against the test origin's
// OpenAI-compatible /v1/chat/completions (tools/chat-origin.mjs) and the real store through the
// bridge: each answer charged what its origin reported, streamed or not; the per-minute budget
// never exceeded; nothing counted for what the gateway refuses.
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import app, { type Bindings, PLANS } from "../../examples/llm-gateway/app";
import { scopedPrefix, testRedis } from "../support/worker/redis";
import { baseEnv, originUrl } from "../support/worker/worker-harness";

const redis = testRedis();
const prefix = scopedPrefix("llm-gateway");
const run = crypto.randomUUID().slice(0, 8);
const customer = (name: string) => `${name}-${run}`;
const env = (
  accounts: Record<string, { customer: string; plan: keyof typeof PLANS }>,
): Bindings => ({
  UPSTASH_REDIS_REST_URL: baseEnv.UPSTASH_REDIS_REST_URL as string,
  UPSTASH_REDIS_REST_TOKEN: baseEnv.UPSTASH_REDIS_REST_TOKEN as string,
  LLM_ORIGIN: originUrl(),
  API_KEYS: JSON.stringify(accounts),
  LIMITER_PREFIX: prefix,
});

interface Asked {
  /** The completion's tokens the origin will report (plus its 10 of prompt). */
  tokens: number;
  maxTokens?: number;
  stream?: boolean;
  user: string;
}

/** One chat completion through the gateway, its body read whole and its settle awaited. */
async function complete(bindings: Bindings, key: string, asked: Asked) {
  const ctx = createExecutionContext();
  const res = await app.fetch(
    new Request("https://gateway.test/v1/chat/completions", {
      method: "POST",
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      body: JSON.stringify({
        model: "test",
        user: asked.user,
        stream: asked.stream ?? false,
        max_tokens: asked.maxTokens ?? 500,
        messages: [{ role: "user", content: String(asked.tokens) }],
      }),
    }),
    bindings,
    ctx,
  );
  const text = await res.text();
  await waitOnExecutionContext(ctx);
  return { res, text };
}

const remaining = (res: Response) =>
  Number(/r=(\d+)/.exec(res.headers.get("RateLimit") ?? "")?.[1]);
const originUsage = async (group: string) =>
  (await (await fetch(`${originUrl()}/__usage?group=${group}`)).json()) as {
    streams: number;
    units: number;
  };

describe("the LLM gateway example", () => {
  it("charges each answer, streamed or not, what its origin reported", async () => {
    const who = customer("acme");
    const bindings = env({ "sk-acme": { customer: who, plan: "free" } });
    const budget = PLANS.free.perMinute;
    // Reserved: max_tokens (500) plus the prompt's characters (3); settled to 10 + 120.
    const first = await complete(bindings, "sk-acme", { tokens: 120, stream: true, user: who });
    expect(first.res.status).toBe(200);
    expect(first.res.headers.get("content-type")).toContain("text/event-stream");
    expect(first.text).toContain('"total_tokens":130');
    expect(remaining(first.res)).toBe(budget - 503);
    // The next answer's headers show the first's charge: 130, and its own reservation.
    const second = await complete(bindings, "sk-acme", { tokens: 40, user: who });
    expect(second.res.status).toBe(200);
    expect(JSON.parse(second.text).usage.total_tokens).toBe(50);
    expect(remaining(second.res)).toBe(budget - 130 - 502);
    const third = await complete(bindings, "sk-acme", { tokens: 1, maxTokens: 1, user: who });
    expect(remaining(third.res)).toBe(budget - 130 - 50 - 2);
    expect(await originUsage(who)).toEqual({ streams: 3, units: 130 + 50 + 11 });
  });

  it("admits until the minute's budget is used, then 429 with Retry-After", async () => {
    const who = customer("busy");
    const bindings = env({ "sk-busy": { customer: who, plan: "free" } });
    // Each reserves 2 000 + 4 and uses 1 010: the reservations bound how many run at once.
    const answers = await Promise.all(
      Array.from({ length: 8 }, () =>
        complete(bindings, "sk-busy", { tokens: 1_000, maxTokens: 2_000, user: who }),
      ),
    );
    const admitted = answers.filter((a) => a.res.status === 200).length;
    const denied = answers.filter((a) => a.res.status === 429);
    expect(admitted).toBeGreaterThanOrEqual(4);
    expect(admitted + denied.length).toBe(8);
    const used = (await originUsage(who)).units;
    expect(used).toBe(admitted * 1_010);
    expect(used).toBeLessThanOrEqual(PLANS.free.perMinute);
    // Then sequentially to the end of the budget: never more than it, in units the origin saw.
    let status = 200;
    while (status === 200) {
      const next = await complete(bindings, "sk-busy", {
        tokens: 1_000,
        maxTokens: 2_000,
        user: who,
      });
      status = next.res.status;
      if (status === 429) {
        expect(Number(next.res.headers.get("Retry-After"))).toBeGreaterThan(0);
        expect(Number(next.res.headers.get("Retry-After"))).toBeLessThanOrEqual(60);
      }
    }
    const total = (await originUsage(who)).units;
    expect(total).toBeLessThanOrEqual(PLANS.free.perMinute);
    // The last admission found less than a reservation left: what a covering reservation costs.
    expect(total).toBeGreaterThan(PLANS.free.perMinute - 2 * 2_004);
  });

  it("a monthly quota: admitted up to it in tokens, then 429 until the next month", async () => {
    const who = customer("trial");
    const bindings = env({ "sk-trial": { customer: who, plan: "trial" } });
    // Each reserves 500 + 3 and uses 410: the month's 5 000 admits a reservation while it fits.
    let last: Awaited<ReturnType<typeof complete>> | undefined;
    for (let i = 0; i < 20; i++) {
      last = await complete(bindings, "sk-trial", { tokens: 400, maxTokens: 500, user: who });
      if (last.res.status !== 200) break;
    }
    expect(last?.res.status).toBe(429);
    expect(JSON.parse(last?.text ?? "{}")).toMatchObject({ violated: ["tokens-month"] });
    const used = await originUsage(who);
    // 11 answers of 410 (4 510), and the 12th's 503 no longer fit: never over the quota.
    expect(used).toEqual({ streams: 11, units: 11 * 410 });
    const now = new Date();
    const nextMonth = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    const retryAfter = Number(last?.res.headers.get("Retry-After"));
    expect(Math.abs(retryAfter - (nextMonth - now.getTime()) / 1000)).toBeLessThan(60);
  });

  it("counts nothing for a request it refuses", async () => {
    const who = customer("careless");
    const bindings = env({ "sk-careless": { customer: who, plan: "free" } });
    const unknown = await complete(bindings, "sk-nobody", { tokens: 5, user: who });
    expect(unknown.res.status).toBe(401);
    const tooMany = await complete(bindings, "sk-careless", {
      tokens: 5,
      maxTokens: PLANS.free.maxTokens + 1,
      user: who,
    });
    expect(tooMany.res.status).toBe(400);
    expect(tooMany.text).toContain("max_tokens");
    expect(await redis.keys(`${prefix}:*${who}*`)).toEqual([]);
    expect(await originUsage(who)).toEqual({ streams: 0, units: 0 });
    // The first request it admits sees the whole budget.
    const ok = await complete(bindings, "sk-careless", { tokens: 5, user: who });
    expect(remaining(ok.res)).toBe(PLANS.free.perMinute - 501);
  });
});
