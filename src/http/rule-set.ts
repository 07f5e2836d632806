/**
 * A configuration's rules as an HTTP surface decides with them (the worker's proxy and /check,
 * or a surface of your own): which rules a request matches, the key a raw client key is counted
 * under, the /check contract (its body in, its answer out) and the one pipeline in front of an
 * origin. Built once per configuration; the Limiter it decides with is handed in per call, so
 * one rule set serves any limiter.
 */

import type { LimiterConfig } from "../config/limiter-config";
import { regionPicker } from "../config/regions-config";
import type { RuleConfig } from "../config/rule-schema";
import { mayHoldLoneSurrogate, type Validated } from "../config/validation";
import type { Limiter } from "../limiter/limiter-api";
import type { WaitUntil } from "../limiter/types";
import { groupAddress } from "../net/ip-address";
import type { NetworkBlocks } from "../net/network-blocks";
import { headerKeyLabel, headerRuleKey } from "../rules/client-key";
import type { ShadowDenyEvent } from "../rules/decide";
import { applyingRules, type CompiledRule, compileRules } from "../rules/match";
import type { RulesOutcome } from "../rules/outcome";
import type { RefundFailedEvent } from "../rules/refund-on-error";
import { answerCheck } from "./check-answer";
import { type CheckRequest, parseCheckBody } from "./check-request";
import { requestCf, requestIdFrom, requestNetwork } from "./incoming-request";
import { runLimited } from "./limit-pipeline";
import { refusal } from "./limited-response";
import { rateLimitHeaderRecord } from "./rate-limit-headers";
import { answerRelease } from "./release-answer";
import { parseReleaseBody, type ReleaseRequest } from "./release-request";
import { answerSettle } from "./settle-answer";
import { parseSettleBody, type SettleRequest } from "./settle-request";

export interface RuleSetOptions {
  /**
   * The region every request is decided in (`LIMITER_REGION`), instead of the one serving its
   * colo or continent (`regions` in the config; docs/regions.md).
   * @default each request's own
   */
  region?: string | undefined;
  /**
   * The secret usage receipts are sealed with (`/check` hands them out, `/check/settle` takes
   * them back: docs/usage.md); the worker's LIMITER_TOKEN. Every instance that settles another's
   * receipts needs the same. @default a random one per isolate (receipts settle there only)
   */
  receiptSecret?: string | undefined;
}

/** One request in front of an origin, as `guard` takes it. */
export interface GuardExchange {
  limiter: Limiter;
  /** The request's URL, when the caller has parsed it already. @default parsed from the request */
  url?: URL | undefined;
  /** Passes the request on (the origin's response); called only when every rule allows. */
  forward(): Promise<Response>;
  /** Keeps lease calls and give-backs alive past the response: `ctx.waitUntil`. @default none */
  waitUntil?: WaitUntil | undefined;
  /** This isolate's copy of the network blocks (`limiter.networkBlocks()`). @default none */
  networkBlocks?: NetworkBlocks | undefined;
  /** Called once per shadow rule that would have denied. @default none */
  onShadowDeny?: ((event: ShadowDenyEvent) => void) | undefined;
  /** Called when a `refundOn: "5xx"` refund could not be made. @default none */
  onRefundFailed?: ((event: RefundFailedEvent) => void) | undefined;
  /** Called with a refused request's outcome before its 429/403/400 is sent. @default none */
  onRefused?: ((outcome: RulesOutcome) => void | Promise<void>) | undefined;
}

export interface RuleSet {
  /** The configuration the set was built from. */
  readonly config: LimiterConfig;
  /** A configured rule by name. */
  rule(name: string): RuleConfig | undefined;
  /** The rules that apply to a request's method and path, in config order. */
  applying(method: string, path: string): RuleConfig[];
  /** The region a request is decided in; undefined: home. */
  regionOf(request: Request): string | undefined;
  /**
   * The key a raw client key is counted under by a rule, as the proxy keys it: an "ip" rule's
   * address grouped (IPv6 per /64), a header rule's value hashed. /check, peek, reset and the
   * plans admin take keys raw and reach the proxy's counts through this.
   */
  keyOf(rule: RuleConfig, raw: string): Promise<string>;
  /**
   * The raw value a header rule's key was hashed from, while this isolate remembers it (the
   * analytics' `keyLabel`: docs/analytics.md "Who is limited"); undefined otherwise.
   */
  keyLabel(key: string): string | undefined;
  /**
   * A /check body (docs/check-api.md) read strictly, with the keys it names already keyed:
   * the first wrong field named, nothing counted. `text` is the body's JSON text.
   */
  parseCheck(json: unknown, text: string): Promise<Validated<CheckRequest>>;
  /**
   * A POST /check/release body `{"rule", "key", "slot"}` read strictly, its key keyed as the
   * rule keys it (keyOf): the first wrong field named, nothing released.
   */
  parseRelease(json: unknown): Promise<Validated<ReleaseRequest>>;
  /** A parsed release given back: 200, or 404 when the slot was not held, 503 store down. */
  answerRelease(
    limiter: Limiter,
    release: ReleaseRequest,
    waitUntil?: WaitUntil,
  ): Promise<Response>;
  /** A POST /check/settle body `{"receipt", "usage"}` read strictly (nothing counted if not). */
  parseSettle(json: unknown): Promise<Validated<SettleRequest>>;
  /** A parsed settle made: 200, 409 settled already, 404 nothing to settle, 503 store down. */
  answerSettle(limiter: Limiter, settle: SettleRequest): Promise<Response>;
  /** A parsed check decided: the /check answer (JSON and rate-limit headers). */
  answerCheck(
    limiter: Limiter,
    check: CheckRequest,
    request: Request,
    waitUntil?: WaitUntil,
  ): Promise<Response>;
  /**
   * One request in front of an origin: the rules it matches decided together, then the origin's
   * response with the rate-limit headers (a 5xx refunded where a rule says so), or the refusal
   * (429, 403 blocked, 400 missing key) without calling `forward`. A request no rule matches is
   * forwarded untouched, with no store call.
   */
  guard(request: Request, exchange: GuardExchange): Promise<Response>;
  /** The rate-limit headers for decisions (as /check spells them). */
  headers(decisions: Parameters<typeof rateLimitHeaderRecord>[0]): Record<string, string>;
}

/**
 * The rule set of a parsed configuration (`parseConfig`): build it once per configuration and
 * decide with any limiter.
 *
 * @example
 * ```ts
 * const rules = createRules(config);
 * // In front of an origin: the matching rules decided, then the origin's answer, headed.
 * return rules.guard(request, { limiter, forward: () => fetch(request), waitUntil });
 * ```
 */
export function createRules(config: LimiterConfig, options: RuleSetOptions = {}): RuleSet {
  const compiled = compileRules(config.rules);
  const byName = new Map(config.rules.map((rule) => [rule.name, rule]));
  const pick = regionPicker(config.regions, options.region?.trim() || undefined);
  const { clientIp, legacyHeaders, requestIdHeaders } = config;
  // The region of a request; its `cf` read only when the picker needs it.
  const regionOf = (request: Request) =>
    pick.readsCf ? pick(requestCf(request)) : pick(undefined);
  const guarded: GuardedRules = { compiled, regionOf, clientIp, legacyHeaders, requestIdHeaders };

  // Random when none is given, made on first use (workerd refuses randomness at module scope).
  let secret = options.receiptSecret || undefined;
  const receiptSecret = () => {
    secret ??= crypto.randomUUID();
    return secret;
  };

  const keyOf = (rule: RuleConfig, raw: string): Promise<string> => {
    if (rule.key === "ip") return Promise.resolve(groupAddress(raw, clientIp) ?? raw);
    if (rule.key.startsWith("header:")) return headerRuleKey(raw);
    return Promise.resolve(raw);
  };

  return {
    config,
    rule: (name) => byName.get(name),
    keyLabel: headerKeyLabel,
    applying: (method, path) => applyingRules(compiled, method, path),
    regionOf,
    keyOf,

    async parseCheck(json, text) {
      const check = parseCheckBody(json, byName, clientIp, !mayHoldLoneSurrogate(text));
      if (!check.ok || !check.value.headerKeyed) return check;
      // A header rule's key given raw (the customer's API key, as the client sends it) keyed as
      // the proxy keys that header: hashed. So /check, peek and reset reach the proxy's log.
      const requests = [...check.value.requests];
      for (const i of check.value.headerKeyed) {
        const request = requests[i];
        if (request) requests[i] = { ...request, key: await headerRuleKey(request.key) };
      }
      return { ok: true, value: { ...check.value, requests } };
    },

    async parseRelease(json) {
      const release = parseReleaseBody(json, byName);
      if (!release.ok) return release;
      const key = await keyOf(release.value.rule, release.value.key);
      return { ok: true, value: { ...release.value, key } };
    },

    answerRelease: (limiter, release, waitUntil) => answerRelease(limiter, release, waitUntil),

    parseSettle: (json) => parseSettleBody(json, receiptSecret()),
    answerSettle,

    answerCheck: (limiter, check, request, waitUntil) =>
      answerCheck(limiter, check, {
        region: regionOf(request),
        waitUntil,
        legacyHeaders,
        receiptSecret,
      }),

    guard: (request, exchange) => guardRequest(request, exchange, guarded),

    headers: (decisions) => rateLimitHeaderRecord(decisions, false),
  };
}

/** What `guard` reads of its rule set. */
interface GuardedRules {
  compiled: readonly CompiledRule[];
  regionOf: (request: Request) => string | undefined;
  clientIp: LimiterConfig["clientIp"];
  legacyHeaders: boolean;
  requestIdHeaders: readonly string[];
}

/**
 * The request in front of an origin: its applying rules, what it is read for once (its region,
 * request id and network identity: incoming-request.ts), then the one pipeline.
 */
function guardRequest(
  request: Request,
  exchange: GuardExchange,
  rules: GuardedRules,
): Promise<Response> {
  const path = (exchange.url ?? new URL(request.url)).pathname;
  const applying = applyingRules(rules.compiled, request.method, path);
  if (applying.length === 0) return exchange.forward();
  const { networkBlocks, onRefused } = exchange;
  const { clientIp, legacyHeaders } = rules;
  const region = rules.regionOf(request);
  const requestId = requestIdFrom(request.headers, rules.requestIdHeaders);
  const network = networkBlocks ? requestNetwork(request, request.headers, clientIp) : undefined;
  return runLimited({
    rules: applying,
    headers: request.headers,
    signal: request.signal,
    limiter: exchange.limiter,
    clientIp,
    requestId,
    waitUntil: exchange.waitUntil,
    region,
    networkBlocks,
    network,
    legacyHeaders,
    onShadowDeny: exchange.onShadowDeny,
    onRefundFailed: exchange.onRefundFailed,
    forward: () => exchange.forward(),
    refuse: async (outcome) => {
      await onRefused?.(outcome);
      return refusal(undefined, outcome, legacyHeaders);
    },
  });
}
