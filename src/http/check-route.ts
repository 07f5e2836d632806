import type { Context } from "hono";
import type { Env } from "../env";
import type { Decision, MultiDecision } from "../limiter/types";
import { getRuntime, type ReadyRuntime } from "../runtime";
import { bearerTokenMatches } from "./bearer-token";
import { type CheckRequest, parseCheckBody } from "./check-request";
import { misconfiguredForOperator, problem } from "./problem";
import { rateLimitHeaders } from "./rate-limit-headers";

/** A check body is a few fields; anything bigger is refused before it is read. */
export const MAX_CHECK_BODY_BYTES = 8 * 1024;

/** POST /check: the decision service (README "The /check contract"). */
export async function checkHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  const parsed = await authorizedCheckRequest(c);
  if (!parsed.ok) return parsed.response;
  const { runtime, request } = parsed;
  const result = await runtime.limiter.limitAll(
    request.requests,
    request.requestId !== undefined ? { requestId: request.requestId } : {},
  );
  return c.json(
    checkAnswer(result, request.multi),
    result.allowed ? 200 : 429,
    Object.fromEntries(
      rateLimitHeaders(result.decisions, { legacy: runtime.config.legacyHeaders }),
    ),
  );
}

/**
 * Everything before a decision, shared by /check and the admin routes: the bearer token, the
 * config, the content type, the size cap and strict validation of the body. Nothing is counted
 * unless this returns ok.
 */
export async function authorizedCheckRequest(
  c: Context<{ Bindings: Env }>,
): Promise<
  { ok: true; runtime: ReadyRuntime; request: CheckRequest } | { ok: false; response: Response }
> {
  const refuse = (response: Response) => ({ ok: false as const, response });
  const expected = c.env.LIMITER_TOKEN;
  if (!expected) {
    // Closed, never open by default: a decision service anyone can drain is a liability. 401
    // like any unauthenticated call (no credential can succeed, and clients handle one status);
    // the detail tells the operator why.
    return refuse(
      problem(
        c,
        401,
        { title: "Unauthorized", detail: "LIMITER_TOKEN is not configured: /check is closed" },
        { "WWW-Authenticate": "Bearer" },
      ),
    );
  }
  if (!(await bearerTokenMatches(c.req.header("Authorization"), expected))) {
    return refuse(
      problem(
        c,
        401,
        { title: "Unauthorized", detail: "missing or wrong bearer token" },
        { "WWW-Authenticate": "Bearer" },
      ),
    );
  }

  const runtime = getRuntime(c.env);
  if (!runtime.ok) {
    // Only past the token: the reason may quote a secret (the public gets the generic 503).
    return refuse(misconfiguredForOperator(c, runtime));
  }

  const contentType = c.req.header("Content-Type") ?? "";
  if (!/^application\/json\s*(;|$)/i.test(contentType)) {
    return refuse(
      problem(c, 415, {
        title: "Unsupported Media Type",
        detail: "send Content-Type: application/json",
      }),
    );
  }
  const body = await readBody(c.req.raw);
  if (body === "too-large") {
    return refuse(
      problem(c, 413, {
        title: "Payload Too Large",
        detail: `a check body is at most ${MAX_CHECK_BODY_BYTES} bytes`,
      }),
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return refuse(
      problem(c, 400, { title: "Bad Request", detail: "body is not valid JSON", field: "body" }),
    );
  }
  const request = parseCheckBody(json, runtime.rulesByName, runtime.config.clientIp);
  if (!request.ok) {
    return refuse(
      problem(c, 400, {
        title: "Bad Request",
        detail: `${request.field} ${request.detail}`,
        field: request.field,
      }),
    );
  }
  return { ok: true, runtime, request: request.value };
}

/**
 * The JSON answer. The top-level limit/remaining/reset/retryAfterMs/source/policy are the binding
 * policy's: the one that denied with the longest wait, or when allowed the one with the least
 * remaining. A `"rules"` check also lists every policy's decision, in the order named.
 */
function checkAnswer(result: MultiDecision, multi: boolean) {
  const binding =
    result.decisions.find((d) => d.policy === result.deniedBy) ??
    result.decisions.reduce((least, d) => (d.remaining < least.remaining ? d : least));
  const { limit, remaining, reset, retryAfterMs, source, policy, algorithm } = binding as Decision;
  return {
    allowed: result.allowed,
    limit,
    remaining,
    reset,
    retryAfterMs: result.allowed ? 0 : retryAfterMs,
    source,
    policy,
    algorithm,
    ...(result.deniedBy !== undefined ? { deniedBy: result.deniedBy } : {}),
    ...(result.replayed ? { replayed: true } : {}),
    ...(multi ? { decisions: result.decisions.map(decisionAnswer) } : {}),
  };
}

function decisionAnswer(decision: Decision) {
  const { policy, algorithm, allowed, limit, remaining, reset, retryAfterMs, source } = decision;
  return { policy, algorithm, allowed, limit, remaining, reset, retryAfterMs, source };
}

/** Reads at most MAX_CHECK_BODY_BYTES, so a huge body is never buffered. */
async function readBody(request: Request): Promise<string | "too-large"> {
  const length = request.headers.get("Content-Length");
  const declared = Number(length ?? "0");
  if (declared > MAX_CHECK_BODY_BYTES) return "too-large";
  if (!request.body) return "";
  // A declared length within the cap is enforced by the runtime (a body longer than its
  // Content-Length is an error): read it in one native call, the common case.
  if (length !== null && Number.isSafeInteger(declared)) return await request.text();
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_CHECK_BODY_BYTES) {
      await reader.cancel();
      return "too-large";
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}
