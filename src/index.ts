// The package's public surface: `import { rateLimit, createLimiter } from "edge-limiter"`.
export type {
  ClientIpConfig,
  LimiterConfig,
  RefundOn,
  RuleConfig,
} from "./config/limiter-config";
export { parseLimiterConfig } from "./config/limiter-config";
export { MAX_LIMIT, MAX_LOG_COST, MAX_LOG_LIMIT } from "./config/limits";
export { clientIp, clientKey } from "./http/client-key";
export {
  type RateLimitOptions,
  type RateLimitResult,
  type RateLimitRule,
  type RateLimitVariables,
  rateLimit,
} from "./http/middleware";
export { rateLimitHeaders } from "./http/rate-limit-headers";
export {
  type RefundFailedEvent,
  type RulesOutcome,
  refundFailed,
  type ShadowDenyEvent,
} from "./http/rule-decisions";
export type { Decision, DecisionSource } from "./limiter/decision";
export {
  type Clock,
  createLimiter,
  denialCacheKey,
  type FailMode,
  type LimitAllOptions,
  type Limiter,
  type LimiterOptions,
  type LimitRequest,
  type MultiDecision,
  type RefundOutcome,
  type RefundReceipt,
} from "./limiter/limiter";
export { ALGORITHMS, type Algorithm } from "./store/algorithm";
export { PolicyBoundsError } from "./store/evaluate";
export { createStoreClient, type StoreClientOptions } from "./store/upstash-client";
