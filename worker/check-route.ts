/**
 * POST /check: the decision service. A caller holding the token names rules (or an ad-hoc limit)
 * and a key; the answer is the limiter's decision as JSON, with the rate-limit headers
 * (the rule set's answerCheck: the /check contract is the library's).
 */

import { authorizeCheck } from "./authorized-check";
import type { Env } from "./env";

/**
 * POST /check (docs/check-api.md), without a Hono context: worker.ts answers it here directly,
 * the one route on the hot path (Hono's dispatch, context and header merging were a tenth of a
 * decision's CPU). The answer is built once: the JSON and the headers in one Response.
 */
export async function checkResponse(
  request: Request,
  env: Env,
  waitUntil?: (promise: Promise<unknown>) => void,
): Promise<Response> {
  const authorized = await authorizeCheck(request, env, "decision");
  if (!authorized.ok) return authorized.response;
  const { runtime, check } = authorized;
  return runtime.rules.answerCheck(runtime.limiter, check, request, waitUntil);
}
