/**
 * What a deployment needs besides the user's entry: `import { createRules } from
 * "edge-limiter/server"` (docs/development.md "Public API" lists every name;
 * test/repo/public-api.test.ts holds this file to that list). The worker in this repository is
 * built on it, and so is any HTTP surface of your own:
 * - `parseConfig`: a LIMITER_CONFIG-shaped configuration read and checked;
 * - `createRules`: what a surface decides with (matching, keys, the /check contract, the
 *   pipeline in front of an origin);
 * - `readJsonBody` and `problemResponse`: a request's JSON body, the problem+json answer;
 * - `parseCheckBody` and `rateLimitHeaders`: the /check body read strictly, and the standard
 *   RateLimit headers for decisions, for a /check of your own without the rule set's answer;
 * - `describeStoreError`: a store error's cause, and the lines the default log writes.
 * The limiter, the store client and analytics come from `edge-limiter` (index.ts).
 */
export {
  type LimiterConfig,
  type ParseConfigOptions,
  parseConfig,
} from "./config/limiter-config";
export type { RuleConfig } from "./config/rule-schema";
export type { Validated } from "./config/validation";
export {
  type AddressGrouping,
  type CheckRequest,
  parseCheckBody,
} from "./http/check-request";
export { type JsonBody, type JsonBodyOptions, readJsonBody } from "./http/json-body";
export { type Problem, problemResponse } from "./http/problem";
export { type HeaderDecision, rateLimitHeaders } from "./http/rate-limit-headers";
export type { ReleaseRequest } from "./http/release-request";
export {
  createRules,
  type GuardExchange,
  type RuleSet,
  type RuleSetOptions,
} from "./http/rule-set";
export {
  type BreakerLine,
  describeStoreError,
  type Meanwhile,
  type StoreErrorCause,
  type StoreErrorLine,
} from "./limiter/degradation-log";
