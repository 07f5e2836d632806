/**
 * src/http/: what every HTTP surface shares (the worker's proxy and /check, the middleware, a
 * surface of your own): the rule set a surface decides with (rule-set.ts), this pipeline, the
 * /check contract (check-request.ts in, check-answer.ts out), reading a JSON body
 * (json-body.ts), and what they answer with (limited-response.ts, rate-limit-headers.ts,
 * problem.ts). Nothing here decides: which rules apply, under which key, and what they decided
 * is rules/'s; counting is the limiter's. It imports rules/ and the layers below it (npm run
 * lint holds the layers: docs/development.md "Layout").
 *
 * This file: the one sequence the proxy and the middleware both run for a request some rule
 * applies to: decide (a network block's refusal first: rules/decide.ts), forward or refuse,
 * refund on 5xx, settle usage rules from the answer, add the headers.
 */
import type { RuleConfig } from "../config/rule-schema";
import { type DecideOptions, decideRules } from "../rules/decide";
import type { RulesOutcome } from "../rules/outcome";
import { type RefundFailedEvent, refundOnServerError } from "../rules/refund-on-error";
import { outcomeHeaders, withRateLimitHeaders } from "./rate-limit-headers";
import { heldUntilReleased, releasingAtEnd } from "./release-at-end";
import { settleFromResponse, usageSettler } from "./usage-settle";

/**
 * One incoming request some rule applies to, as a surface hands it over: what to decide it by,
 * and how this surface passes it on or refuses it. (Its DecideOptions members go to decideRules
 * as they are: one object per request, no copy.)
 */
export interface LimitedExchange extends DecideOptions {
  /** The rules that apply to the request (applyingRules): at least one. */
  rules: readonly RuleConfig[];
  /** The incoming HTTP request's headers: client keys are read from them. */
  headers: Headers;
  /** Also send X-RateLimit-Limit / -Remaining / -Reset. */
  legacyHeaders: boolean;
  /**
   * The incoming request's signal: when it aborts (the client went away) while the answer's body
   * is still being delivered, the request's concurrency slots are released then. @default none
   */
  signal?: AbortSignal | undefined;
  /** Called when a `refundOn: "5xx"` refund could not be made. @default none */
  onRefundFailed?: ((event: RefundFailedEvent) => void) | undefined;
  /** Passes the request on: the origin's response (proxy), or the app's after `next()`. */
  forward(outcome: RulesOutcome): Promise<Response>;
  /** The answer to a request the rules refused; it carries its own headers. */
  refuse(outcome: RulesOutcome): Response | Promise<Response>;
}

/**
 * Decides the request against its rules; a refused one gets `refuse`'s answer and is never
 * forwarded. A passed one is forwarded; when the answer is a 5xx, the rules with
 * `refundOn: "5xx"` give the request back, awaited so the client's next request already sees it
 * (bounded by the store timeout). A usage rule's request not settled yet (`outcome.settle`) is
 * settled from the answer (usage-settle.ts): a header at once, a body's usage as it passes to
 * the client. The answer then carries the rate-limit headers as they stand after any refund (the
 * cost given back is in `remaining`) or a header's settle.
 */
export async function runLimited(exchange: LimitedExchange): Promise<Response> {
  // A network block refuses before any key is derived or anything counted (decideRules).
  const outcome = await decideRules(exchange.rules, exchange.headers, exchange);
  // A refused request holds no concurrency slots (decideRules gave back any it took); a
  // forwarded one holds them while in flight, until its answer's body ends.
  if (!outcome.allowed) return exchange.refuse(outcome);
  const { limiter, waitUntil } = exchange;
  const held = outcome.slots;
  const settler = usageSettler(outcome, exchange.rules, limiter);
  if (settler) outcome.settle = settler.settle;
  // release never rejects, and its waitUntil keeps it alive past the response: not awaited.
  // The context is held from here until it has run, so a client's disconnect still reaches it.
  const release = held
    ? heldUntilReleased(() => limiter.release(held, { waitUntil }), waitUntil)
    : undefined;
  let response: Response;
  try {
    response = await exchange.forward(outcome);
  } catch (error) {
    release?.();
    throw error;
  }
  const settled = await refundOnServerError(
    outcome,
    exchange.rules,
    response.status,
    exchange.limiter,
    exchange.onRefundFailed,
  );
  const read = settler
    ? await settleFromResponse(settler, response, exchange)
    : { response, reading: false };
  // The body as the client gets it (holding the slots until it has been delivered), then the
  // headers, which keep that body. A body read for its usage is wrapped even without slots, as
  // usage-reader.ts asks: in workerd the wrap's pipe sees drops a JS stream's cancel does not
  // (release-at-end.ts), and its failure cancels the reader, whose usage then resolves. (On the
  // workerd measured, test/e2e/usage-disconnect.test.ts passed without it too: a second path.)
  const end = release ?? (read.reading ? () => {} : undefined);
  const delivered = end ? releasingAtEnd(read.response, end, exchange.signal) : read.response;
  return withRateLimitHeaders(delivered, outcomeHeaders(settled, exchange.legacyHeaders));
}
