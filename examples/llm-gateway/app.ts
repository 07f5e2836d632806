// An LLM gateway: an OpenAI-compatible API in front of an origin that serves one, limited in
// tokens per customer, by plan: a per-minute budget and a monthly quota, each charged what every
// answer really used (read from its `usage`, streamed or not), with a reservation that covers
// any answer, so neither is ever exceeded (docs/llm-gateway.md).
//   npm run bridge, then: npx wrangler dev examples/llm-gateway/app.ts --port 8789 \
//     --var UPSTASH_REDIS_REST_URL:http://127.0.0.1:8079 --var UPSTASH_REDIS_REST_TOKEN:dev-bridge-token \
//     --var LLM_ORIGIN:https://api.openai.com --var 'API_KEYS:{"sk-demo":{"customer":"acme","plan":"free"}}'

import { createLimiter, createStoreClient, fromEnv, type Limiter, rateLimit } from "edge-limiter";
import { type Context, Hono } from "hono";

export interface Bindings {
  UPSTASH_REDIS_REST_URL: string;
  UPSTASH_REDIS_REST_TOKEN: string;
  /** The OpenAI-compatible API requests go to (its base URL). */
  LLM_ORIGIN: string;
  /**
   * The gateway's API keys, as JSON: `{"<key>": {"customer": "<id>", "plan": "trial" | "free" |
   * "pro"}}`.
   * A real gateway looks its keys up in KV or a database; the limiter needs only the two fields.
   */
  API_KEYS: string;
  /** The origin's own API key, sent on as `Authorization: Bearer …`. @default none */
  LLM_API_KEY?: string;
  /** Redis key prefix. @default "llm-gateway" */
  LIMITER_PREFIX?: string;
}

/** Tokens per plan: a minute's budget, a calendar month's, and the most one request may ask. */
export const PLANS = {
  trial: { perMinute: 10_000, perMonth: 5_000, maxTokens: 1_000 },
  free: { perMinute: 10_000, perMonth: 200_000, maxTokens: 2_000 },
  pro: { perMinute: 200_000, perMonth: 50_000_000, maxTokens: 16_000 },
} as const;
type Plan = keyof typeof PLANS;

/** What a request's budget is decided on: the customer, its plan and the reservation. */
interface Caller {
  customer: string;
  plan: Plan;
  /** The most this request can use: its `max_tokens` plus its prompt's characters. */
  reservation: number;
}

type AppEnv = { Bindings: Bindings; Variables: { caller: Caller; body: ChatRequest } };
interface ChatRequest {
  messages: { content?: unknown }[];
  max_tokens?: number;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  [field: string]: unknown;
}

const problem = (c: Context<AppEnv>, status: 400 | 401, detail: string) =>
  c.json({ error: { message: detail, type: "invalid_request_error" } }, status);

function keys(env: Bindings): Record<string, { customer: string; plan: Plan }> {
  try {
    return JSON.parse(env.API_KEYS) as Record<string, { customer: string; plan: Plan }>;
  } catch {
    return {};
  }
}

// Built on the first request (bindings exist only inside one) and kept for the isolate: its
// denial cache and breaker outlive a request.
let limiter: Limiter | undefined;
const limiterFor = (c: Context<AppEnv>): Limiter =>
  (limiter ??= createLimiter({
    store: createStoreClient(fromEnv(c)),
    prefix: c.env.LIMITER_PREFIX ?? "llm-gateway",
  }));

const app = new Hono<AppEnv>();

// Who is calling, and what it asks for, before anything is counted: a request the gateway
// refuses (unknown key, a malformed body, more tokens than its plan allows) costs nothing.
app.use("/v1/chat/completions", async (c, next) => {
  const key = c.req.header("Authorization")?.replace(/^Bearer\s+/i, "") ?? "";
  const account = Object.hasOwn(keys(c.env), key) ? keys(c.env)[key] : undefined;
  if (!account || !(account.plan in PLANS)) return problem(c, 401, "unknown API key");
  const body = (await c.req.json().catch(() => undefined)) as ChatRequest | undefined;
  if (!body || !Array.isArray(body.messages)) {
    return problem(c, 400, "messages: expected a chat completion request");
  }
  const plan = PLANS[account.plan];
  const maxTokens = body.max_tokens ?? 1_024;
  if (!Number.isSafeInteger(maxTokens) || maxTokens < 1 || maxTokens > plan.maxTokens) {
    return problem(c, 400, `max_tokens: an integer from 1 to ${plan.maxTokens} on this plan`);
  }
  // A token is at least a character of the prompt, so this covers any answer: the budget is a
  // hard limit (docs/usage.md, "How exact"). Capped at the minute's budget, which admits it alone.
  const prompt = body.messages.reduce(
    (n, m) => n + (typeof m.content === "string" ? m.content.length : JSON.stringify(m).length),
    0,
  );
  const reservation = Math.min(maxTokens + prompt, plan.perMinute);
  c.set("caller", { customer: account.customer, plan: account.plan, reservation });
  c.set("body", { ...body, max_tokens: maxTokens });
  await next();
});

app.use(
  "/v1/chat/completions",
  rateLimit<AppEnv>({
    limiter: limiterFor,
    key: (c) => c.get("caller").customer,
    rules: [
      {
        name: "tokens-minute",
        window: "1m",
        limit: (c) => PLANS[c.get("caller").plan].perMinute,
        cost: (c) => c.get("caller").reservation,
        // OpenAI's total; Anthropic's API would be ["message.usage.input_tokens",
        // "usage.output_tokens"].
        usage: { json: "usage.total_tokens" },
      },
      {
        // The month the plan pays for: from the 1st at midnight UTC (`anchor` moves it to a
        // billing day; a customer's own, through an override: docs/calendar-quotas.md).
        name: "tokens-month",
        period: "month",
        limit: (c) => PLANS[c.get("caller").plan].perMonth,
        cost: (c) => c.get("caller").reservation,
        usage: { json: "usage.total_tokens" },
      },
    ],
  }),
);

app.post("/v1/chat/completions", (c) => {
  const body = c.get("body");
  // A stream carries its usage only when asked: without it the reservation would stand.
  const sent = body.stream
    ? { ...body, stream_options: { ...body.stream_options, include_usage: true } }
    : body;
  // The origin's answer goes back as it comes: the middleware reads its usage as it passes.
  return fetch(new URL("/v1/chat/completions", c.env.LLM_ORIGIN), {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      ...(c.env.LLM_API_KEY ? { Authorization: `Bearer ${c.env.LLM_API_KEY}` } : {}),
    },
    body: JSON.stringify(sent),
  });
});

export default app;
