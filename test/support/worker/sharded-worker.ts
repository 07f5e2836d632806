// The worker with three shards, as the worker tests bind them: "" on the test bridge (database 0),
// B and C on the shard bridges (databases 1 and 2 of the same Redis).
import { inject } from "vitest";
import type { Env } from "../../../worker/env";
import { baseEnv, postCheck } from "./worker-harness";

/**
 * The worker's bindings with the three shards and this LIMITER_CONFIG: `shards` "", B, C and a
 * 10 s `timeoutMs` unless it says otherwise (these tests are not about deadlines: a busy machine's
 * store must still decide, not the fallback).
 */
export function shardedEnv(config: Record<string, unknown>, overrides: Partial<Env> = {}): Env {
  const [urlB, urlC] = inject("shardBridgeUrls");
  return {
    ...baseEnv,
    LIMITER_CONFIG: JSON.stringify({ shards: ["", "B", "C"], timeoutMs: 10_000, ...config }),
    UPSTASH_REDIS_REST_URL_B: urlB,
    UPSTASH_REDIS_REST_TOKEN_B: baseEnv.UPSTASH_REDIS_REST_TOKEN,
    UPSTASH_REDIS_REST_URL_C: urlC,
    UPSTASH_REDIS_REST_TOKEN_C: baseEnv.UPSTASH_REDIS_REST_TOKEN,
    ...overrides,
  } as Env;
}

/**
 * A fresh client key that the worker with these bindings places on `shard`, found by asking
 * /check under `rule` (one with room to spare, keyed as the rules under test are).
 */
export async function keyOnShard(
  env: Env,
  rule: string,
  shard: string,
  label: string,
): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const key = `${label}-${i}-${crypto.randomUUID()}`;
    const answer = await (await postCheck(env, { rule, key })).json<{ shard?: string }>();
    if (answer.shard === shard) return key;
  }
  throw new Error(`no key of 200 placed on shard "${shard}" (is the config valid?)`);
}
