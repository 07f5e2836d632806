/**
 * The Hono middleware (`rateLimit()`, public): its options, then the translation of a Hono
 * context to the limit pipeline (limit-pipeline.ts) and back: `c.get("rateLimit")`, `next()`,
 * `c.res`.
 */
import type { Context, Env as HonoEnv, MiddlewareHandler } from "hono";
import { type ClientIpConfig, DEFAULT_CLIENT_IP } from "../config/client-ip-config";
import { parseRules } from "../config/limiter-config";
import { invalid, type Validated } from "../config/validation";
import { requestIdFrom, requestNetwork } from "../http/incoming-request";
import { runLimited } from "../http/limit-pipeline";
import { refusal } from "../http/limited-response";
import { misconfigured } from "../http/problem";
import { outcomeHeaders, withRateLimitHeaders } from "../http/rate-limit-headers";
import type { Limiter } from "../limiter/limiter-api";
import type { NetworkBlocks } from "../net/network-blocks";
import type { ShadowDenyEvent } from "../rules/decide";
import { applyingRules, compileRules } from "../rules/match";
import type { RulesOutcome } from "../rules/outcome";
import type { RefundFailedEvent } from "../rules/refund-on-error";
import { ipHeaders, ownAddressHeaders } from "./ip-headers";
import {
  limiterForStore,
  type MiddlewareLimiterOptions,
  MissingStoreSettingError,
  type StoreInput,
} from "./middleware-store";
import { type RateLimitRule, splitPerRequest, withRequestValues } from "./per-request-rules";
import { waitUntilOf } from "./wait-until";

/**
 * A rule as the middleware takes it: the one rule shape, a LIMITER_CONFIG rule as written
 * (docs/configuration.md; config/rule-schema.ts, where every field is documented and checked),
 * whose `limit` and `cost` may also be functions of the context (per-request-rules.ts).
 */

/** What `c.get("rateLimit")` holds after the middleware ran (see RulesOutcome). */
export type RateLimitResult = RulesOutcome;

/**
 * The middleware's variable. Every Hono context knows it (the augmentation below), so
 * `c.get("rateLimit")` is typed without it; naming it in an app's Variables still works.
 */
export interface RateLimitVariables {
  rateLimit: RateLimitResult;
}

// As hono's own middleware declare theirs (jwt, request-id): `c.set` and `c.get` of "rateLimit"
// are typed in every app that imports the package, whatever Variables the app declares.
declare module "hono" {
  interface ContextVariableMap extends RateLimitVariables {}
}

export interface RateLimitOptions<E extends HonoEnv = HonoEnv> {
  /**
   * Where the counts live: `{ url, token }` of an Upstash database (or the local bridge), a
   * client from `createStoreClient`, or a function of the context returning either (bindings
   * exist only inside a request: `fromEnv` reads UPSTASH_REDIS_REST_URL and _TOKEN). The
   * middleware builds one limiter per store and keeps it for the isolate. Give this or `limiter`.
   */
  store?: StoreInput | ((c: Context<E>) => StoreInput);
  /**
   * The limiter's options when it is built from `store` (prefix, timeoutMs, failMode, clock…).
   * @default createLimiter's defaults (prefix "edge-limiter", timeoutMs 500, failMode "open")
   */
  limiterOptions?: MiddlewareLimiterOptions;
  /**
   * A limiter of your own (`createLimiter({ store })`), or a function of the context returning
   * it, instead of `store`: to share one limiter between middleware and your code.
   */
  limiter?: Limiter | ((c: Context<E>) => Limiter);
  /**
   * One rule or several; a request passes only if every rule that applies allows it. A rule's
   * `limit` and `cost` may be functions of the context, sync or async (a plan's limit from a JWT
   * claim): docs/plans.md.
   */
  rules: RateLimitRule<E> | readonly RateLimitRule<E>[];
  /**
   * The client key, for every rule (a user id, an API key, a tenant). Return undefined when the
   * request has none: each rule's `missingKey` decides. Keys are used as given (not hashed).
   * `c.req.header(name)` joins a repeated header with ", ": derive the key from the value your
   * app authenticates (e.g. the first element, as "header:<name>" rules do), or a client can make
   * a fresh key per request by appending a copy.
   * @default each rule's `key` spec ("ip": CF-Connecting-IP, IPv6 grouped by /64)
   */
  key?: (c: Context<E>) => string | undefined | Promise<string | undefined>;
  /**
   * Answers a request a rule denied (not one refused for missing key material: that is a 400).
   * @default a 429 problem+json naming the violated policies, with RateLimit / Retry-After headers
   */
  handler?: (c: Context<E>, result: RateLimitResult) => Response | Promise<Response>;
  /** Requests for which it returns true are not limited (no store call, no headers). @default never */
  skip?: (c: Context<E>) => boolean | Promise<boolean>;
  /** Also send X-RateLimit-Limit / -Remaining / -Reset. @default false */
  legacyHeaders?: boolean;
  /** How "ip" keys are read and grouped. @default { ipv6PrefixLength: 64, ipv4PrefixLength: 32 } */
  clientIp?: Partial<ClientIpConfig>;
  /**
   * The client's address for "ip" rules. On Cloudflare it is CF-Connecting-IP. Elsewhere no
   * proxy sets that header (and any client may send one), so by default the middleware reads the
   * runtime's connection info as Hono's `getConnInfo` does (Bun, Deno, @hono/node-server), and
   * warns once if it finds none: every client would then share one counter (`missingKey`).
   * Give your own behind a proxy of yours (or set `clientIp.trustedProxyHeader`). Network blocks
   * match this address too, whatever the rules are keyed by.
   * @default CF-Connecting-IP on Cloudflare, the connection's address elsewhere
   */
  ipOf?: (c: Context<E>) => string | undefined;
  /**
   * The request's region, one of the limiter's `regions.stores` (docs/regions.md): a rule with
   * `lease: true` is then decided there, near, from leases home granted that region. For
   * example `(c) => c.req.raw.cf?.continent === "EU" ? "eu" : undefined`.
   * @default the limiter's `regions.regionOf`, else home
   */
  regionOf?: (c: Context<E>) => string | undefined;
  /**
   * Network blocks (IP/CIDR, country, ASN) set at run time (docs/plans.md): `true` for the
   * limiter's own copy (`limiter.networkBlocks()`, shared by every middleware on that limiter),
   * or a copy of your own (`limiter.networkBlocks({ refreshMs })`). A blocked request gets
   * a 403 problem+json. They match the client's own address (as "ip" rules read it: `ipOf`, the
   * connection's, CF-Connecting-IP on Cloudflare) even when every rule is keyed by a header or
   * `key`. Key blocks need nothing here: rules with `overrides: true` read them.
   * @default none checked
   */
  networkBlocks?: NetworkBlocks | true;
  /**
   * Request headers naming a request id (the first present wins): a retry carrying it within
   * the window is counted once and gets the original answer. Off by default: a client repeating
   * one id would get every repeat through (docs/request-ids-and-refunds.md).
   * @default []
   */
  requestIdHeaders?: readonly string[];
  /**
   * Called once per shadow rule that would have denied a request (log it, count it). The
   * middleware writes nothing to the console itself; the outcome is also on
   * `c.get("rateLimit").shadowDenied`.
   * @default none
   */
  onShadowDeny?: (event: ShadowDenyEvent) => void;
  /**
   * Called when a `refundOn: "5xx"` refund could not be made (the store did not answer). The
   * middleware writes nothing to the console itself.
   * @default none
   */
  onRefundFailed?: (event: RefundFailedEvent) => void;
}

/**
 * Rate-limits the routes it is mounted on. Every response it lets through carries
 * RateLimit-Policy / RateLimit; a refused one gets `handler`'s answer (429 problem+json by
 * default). The outcome is on `c.get("rateLimit")`. Invalid rules, or neither `store` nor
 * `limiter`, are reported once and every request through the middleware is answered 503: a typo
 * must not leave a route unprotected.
 *
 * @example
 * ```ts
 * import { fromEnv, rateLimit } from "edge-limiter";
 *
 * app.use("/api/*", rateLimit({ rules: { name: "api", limit: 100, window: "1m" }, store: fromEnv }));
 * ```
 */
export function rateLimit<E extends HonoEnv = HonoEnv>(
  options: RateLimitOptions<E>,
): MiddlewareHandler<E> {
  const given = [options.rules].flat() as RateLimitRule<E>[];
  const { inputs, dynamic } = splitPerRequest(given);
  const parsed = withLimiterSource(parseRules(inputs), options);
  if (!parsed.ok) {
    console.error(
      JSON.stringify({
        event: "rate-limit-misconfigured",
        field: parsed.field,
        detail: parsed.detail,
      }),
    );
  }
  const rules = parsed.ok ? compileRules(parsed.value) : [];
  const clientIp: ClientIpConfig = { ...DEFAULT_CLIENT_IP, ...options.clientIp };
  const legacy = options.legacyHeaders ?? false;
  const requestIdHeaders = options.requestIdHeaders ?? [];
  // A missing store setting is logged once, not on every request; so is a missing client address.
  let reportedMissing = false;
  let reportedNoIp = false;
  const warnNoIp = (rule: string) => {
    if (reportedNoIp) return;
    reportedNoIp = true;
    console.warn(
      JSON.stringify({
        event: "rate-limit-no-client-ip",
        rule,
        detail:
          'no CF-Connecting-IP and no connection address: every client shares this rule\'s "missingKey" counter. Outside Cloudflare give ipOf, key, or clientIp.trustedProxyHeader.',
      }),
    );
  };
  const limiterOf: (c: Context<E>) => Limiter =
    typeof options.limiter === "function"
      ? options.limiter
      : options.limiter
        ? () => options.limiter as Limiter
        : limiterForStore(
            options.store as StoreInput | ((c: Context<E>) => StoreInput),
            options.limiterOptions ?? {},
          );

  return async function rateLimitMiddleware(c, next) {
    if (!parsed.ok) {
      return misconfigured(c, parsed);
    }
    if (options.skip && (await options.skip(c))) return next();
    const matched = applyingRules(rules, c.req.method, c.req.path);
    if (matched.length === 0) return next();
    // This request's limits and costs, where a rule gives them as functions.
    const applying = await withRequestValues(matched, dynamic, c);
    if (!Array.isArray(applying)) {
      console.error(JSON.stringify({ event: "rate-limit-misconfigured", ...applying }));
      return misconfigured(c, applying);
    }
    // Network blocks match the client's own address whatever the rules are keyed by: a header
    // or a key function must not let a client off Cloudflare pick the address it is matched by.
    const own = options.networkBlocks ? ownAddressHeaders(c, options.ipOf) : undefined;
    const headers = options.key
      ? c.req.raw.headers
      : ipHeaders(c, applying, options.ipOf, warnNoIp, own);

    const { handler, key: keyFn } = options;
    let limiter: Limiter;
    try {
      limiter = limiterOf(c);
    } catch (error) {
      // A binding the store needs is missing (fromEnv, a function of the context): 503 naming it.
      if (!(error instanceof MissingStoreSettingError)) throw error;
      if (!reportedMissing) {
        reportedMissing = true;
        console.error(
          JSON.stringify({
            event: "rate-limit-misconfigured",
            field: error.setting,
            detail: error.message,
          }),
        );
      }
      return misconfigured(c, { field: error.setting });
    }
    // The key function runs once per request, whatever the number of rules.
    let key: Promise<string | undefined> | undefined;
    let forwarded = false;
    const response = await runLimited({
      rules: applying,
      headers,
      signal: c.req.raw.signal,
      limiter,
      clientIp,
      keyOf: keyFn ? () => (key ??= Promise.resolve(keyFn(c))) : undefined,
      requestId: requestIdFrom(c.req.raw.headers, requestIdHeaders),
      waitUntil: waitUntilOf(c),
      region: options.regionOf?.(c),
      networkBlocks:
        options.networkBlocks === true ? limiter.networkBlocks() : options.networkBlocks,
      network: own ? requestNetwork(c.req.raw, own, clientIp) : undefined,
      legacyHeaders: legacy,
      onShadowDeny: options.onShadowDeny,
      onRefundFailed: options.onRefundFailed,
      forward: async (outcome) => {
        setRateLimit(c, outcome);
        forwarded = true;
        await next();
        return c.res;
      },
      refuse: async (outcome) => {
        setRateLimit(c, outcome);
        // A missing key under `missingKey: "deny"` is the client's error (400), a request id
        // decided with other parameters a conflict (409): neither is a rate limit.
        // A block (403) is not a rate limit either.
        if (!handler || outcome.missingKey || outcome.conflict || outcome.blocked) {
          return refusal(c, outcome, legacy);
        }
        // A custom answer still carries the headers: clients learn when to come back.
        return withRateLimitHeaders(await handler(c, outcome), outcomeHeaders(outcome, legacy));
      },
    });
    // A refusal is returned (the app never ran). After next(), Hono ignores a returned response:
    // the app's, now with the headers, replaces c.res.
    if (!forwarded) return response;
    c.res = response;
  };
}

/** Exactly one of `store` and `limiter`, or the rules' parse fails with the reason. */
function withLimiterSource<T>(
  parsed: Validated<T>,
  options: { store?: unknown; limiter?: unknown },
): Validated<T> {
  if (!parsed.ok) return parsed;
  if (options.store === undefined && options.limiter === undefined) {
    return invalid(
      "store",
      "is required: give the store ({ url, token }, a client, fromEnv) or a limiter",
    );
  }
  if (options.store !== undefined && options.limiter !== undefined) {
    return invalid("store", "give store or limiter, not both");
  }
  return parsed;
}

/** What `c.get("rateLimit")` reads, for the handler and the app alike. */
function setRateLimit<E extends HonoEnv>(c: Context<E>, outcome: RulesOutcome): void {
  c.set("rateLimit", outcome);
}
