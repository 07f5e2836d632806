/**
 * The /check contract's answer (docs/check-api.md): a parsed check decided by the limiter and
 * answered as JSON with the rate-limit headers, 200, 429, 403 for a block or 409 for a request id
 * reused with other parameters. Built once: the JSON and the headers in one Response.
 */

import type { Limiter } from "../limiter/limiter-api";
import type { Decision, LimitAllOptions, MultiDecision, WaitUntil } from "../limiter/types";
import { enforcedDecisions, limitWithShadow } from "../rules/decide";
import type { CheckRequest } from "./check-request";
import { requestIdConflict } from "./limited-response";
import { rateLimitHeaderRecord } from "./rate-limit-headers";
import { sealReceipt } from "./usage-receipt";

/** Where and how a check is decided: the request's region, the runtime's waitUntil. */
export interface CheckContext {
  region?: string | undefined;
  waitUntil?: WaitUntil | undefined;
  /** Also send X-RateLimit-Limit / -Remaining / -Reset. */
  legacyHeaders: boolean;
  /** The secret a usage check's receipt is sealed with (usage-receipt.ts). */
  receiptSecret?: (() => string) | undefined;
}

/** The check decided, as the answer /check sends. */
export async function answerCheck(
  limiter: Limiter,
  check: CheckRequest,
  context: CheckContext,
): Promise<Response> {
  const options = limitOptions(check, context.waitUntil, context.region);
  const decided: ShadowedDecision = check.shadow
    ? await withShadowRules(limiter, check, check.shadow, options)
    : await limiter.limitAll(check.requests, options);
  if (decided.conflict) return requestIdConflict(decided.conflict);
  // A shadow rule's denial is not enforced: no Retry-After on an answer that lets the request on.
  const { shadowDenied } = decided;
  const shown = shadowDenied
    ? enforcedDecisions({ decisions: decided.decisions, shadowDenied })
    : decided.decisions;
  const headers = rateLimitHeaderRecord(shown, context.legacyHeaders);
  headers["Content-Type"] = "application/json";
  const answer = checkAnswer(decided, check.multi);
  // A usage request admitted: what POST /check/settle takes to charge what it used.
  if (check.usage && decided.allowed && decided.receipt && context.receiptSecret) {
    const receipt = await sealReceipt(decided.receipt, context.receiptSecret());
    if (receipt !== undefined) answer.receipt = receipt;
  }
  return new Response(JSON.stringify(answer), {
    // A blocked key: 403, not 429 (waiting does not help unless the block ends).
    status: decided.allowed ? 200 : decided.blocked ? 403 : 429,
    headers,
  });
}

/** A decision of named rules some of which are shadow rules: which of those would have denied. */
type ShadowedDecision = MultiDecision & { shadowDenied?: string[] };

/**
 * Named rules with shadow rules among them, decided as the proxy decides them (limitWithShadow):
 * a shadow rule counts and reports but never denies.
 */
async function withShadowRules(
  limiter: Limiter,
  check: CheckRequest,
  shadow: ReadonlySet<string>,
  options: LimitAllOptions,
): Promise<ShadowedDecision> {
  // A refused request holds no slots: limitWithShadow gave back any a shadow rule took.
  const { enforcedDecided, shadowDecided, decisions, shadowDenied, slots } = await limitWithShadow(
    limiter,
    check.requests,
    shadow,
    options,
  );
  return {
    allowed: enforcedDecided?.allowed ?? true,
    decisions,
    ...(slots ? { slots } : {}),
    replayed: enforcedDecided?.replayed ?? shadowDecided?.replayed ?? false,
    ...(enforcedDecided?.deniedBy !== undefined ? { deniedBy: enforcedDecided.deniedBy } : {}),
    ...(enforcedDecided?.conflict ? { conflict: enforcedDecided.conflict } : {}),
    ...(enforcedDecided?.blocked ? { blocked: enforcedDecided.blocked } : {}),
    ...(shadowDenied.length > 0 ? { shadowDenied } : {}),
  };
}

// Read only by the limiter, never written: one object for every request without options.
const NO_OPTIONS: LimitAllOptions = Object.freeze({});

/** limitAll's options: one literal per case, no spread of empty objects per request. */
function limitOptions(
  check: CheckRequest,
  waitUntil: WaitUntil | undefined,
  region: string | undefined,
): LimitAllOptions {
  const { requestId } = check;
  if (region !== undefined) {
    return {
      ...(requestId !== undefined ? { requestId } : {}),
      ...(waitUntil ? { waitUntil } : {}),
      region,
    };
  }
  if (requestId === undefined) return waitUntil ? { waitUntil } : NO_OPTIONS;
  return waitUntil ? { requestId, waitUntil } : { requestId };
}

/**
 * The JSON answer. The top-level limit/remaining/reset/retryAfterMs/source/policy are the binding
 * policy's: the one that denied with the longest wait, or when allowed the one with the least
 * remaining. A `"rules"` check also lists every policy's decision, in the order named.
 */
function checkAnswer(decided: ShadowedDecision, multi: boolean) {
  const binding =
    decided.decisions.find((d) => d.policy === decided.deniedBy) ??
    decided.decisions.reduce((least, d) => (d.remaining < least.remaining ? d : least));
  const { limit, remaining, reset, retryAfterMs, source, policy, algorithm } = binding as Decision;
  const answer: Record<string, unknown> = {
    allowed: decided.allowed,
    limit,
    remaining,
    reset,
    retryAfterMs: decided.allowed ? 0 : retryAfterMs,
    source,
    policy,
    algorithm,
  };
  // Assigned, not spread from `cond ? {…} : {}`: no empty object per field per request.
  // The shard that decided the binding policy (docs/shards.md), when the limiter has shards.
  const { shard } = binding as Decision;
  if (shard !== undefined) answer.shard = shard;
  if (decided.deniedBy !== undefined) answer.deniedBy = decided.deniedBy;
  if (decided.replayed) answer.replayed = true;
  if (decided.blocked) {
    answer.blocked = true;
    if (decided.blocked.until !== undefined) answer.blockedUntil = decided.blocked.until;
  }
  // Shadow rules that would have denied: reported, not enforced (the request is allowed).
  if (decided.shadowDenied) answer.shadowDenied = decided.shadowDenied;
  if (multi) answer.decisions = decided.decisions.map(decisionAnswer);
  // Concurrency slots (docs/concurrency.md): each to be given back with POST /check/release.
  const slots = decided.slots;
  const first = slots?.[0];
  if (first) {
    answer.slot = first.slot;
    answer.expires = first.expires;
    if (multi || (slots?.length ?? 0) > 1) {
      answer.slots = slots?.map(({ policy, slot, expires }) => ({ rule: policy, slot, expires }));
    }
  }
  return answer;
}

function decisionAnswer(decision: Decision) {
  const { policy, algorithm, allowed, limit, remaining, reset, retryAfterMs, source } = decision;
  const answer: Record<string, unknown> = {
    policy,
    algorithm,
    allowed,
    limit,
    remaining,
    reset,
    retryAfterMs,
    source,
  };
  if (decision.shard !== undefined) answer.shard = decision.shard;
  return answer;
}
