/**
 * The package's public surface, and all of it: `import { rateLimit } from "edge-limiter"`.
 * Four entry points and the types they take and return (docs/development.md "Public API"):
 * - `rateLimit()`: the Hono middleware;
 * - `createLimiter()`: the limiter behind it, to decide in your own code;
 * - `createStoreClient()`: the @upstash/redis client configured for a decision on the request path;
 * - `createAnalytics()`: per-rule counts for a limiter's decisions (`onDecision`);
 * and `fromEnv`, the store from UPSTASH_REDIS_REST_URL / _TOKEN, for `rateLimit({ store })`.
 * What is done to a limiter's keys besides deciding (peek, reset, overrides, key and network
 * blocks, the network blocks' copy for the middleware) are methods of the `Limiter`.
 * Everything else in src/ is internal and may change in any release.
 */
export { createAnalytics } from "./analytics/create-analytics";
export type {
  Analytics,
  AnalyticsEngineDatasetLike,
  AnalyticsOptions,
  AnalyticsStore,
  IsolateStats,
  RuleMinuteCounts,
  StatsRule,
  StatsSpan,
} from "./analytics/types";
export type { ClientIpConfig } from "./config/client-ip-config";
export {
  MAX_LIMIT,
  MAX_LOG_COST,
  MAX_LOG_LIMIT,
  MAX_RING_COST,
  MAX_ZSET_COST,
  MAX_ZSET_LIMIT,
} from "./config/limits";
export {
  type RateLimitOptions,
  type RateLimitResult,
  type RateLimitRule,
  type RateLimitVariables,
  rateLimit,
} from "./http/middleware";
export {
  fromEnv,
  type MiddlewareLimiterOptions,
  MissingStoreSettingError,
  type StoreConfig,
  type StoreInput,
} from "./http/middleware-store";
export type { BreakerEvent } from "./limiter/circuit-breaker";
export { createLimiter } from "./limiter/create-limiter";
export type { LeaseOptions } from "./limiter/lease-sizing";
export type { NetworkBlocksOptions } from "./limiter/network-block-copies";
export type { Peek } from "./limiter/peek";
export type {
  KeyBlocksAdmin,
  NetworkBlock,
  NetworkBlocksAdmin,
  Overrides,
  PlanChange,
  PlanKey,
} from "./limiter/plan-changes";
export type { PlanEntry, PlanListing, PlanPage, Plans } from "./limiter/plan-listing";
export type { RegionsOptions } from "./limiter/regional-leases";
export type {
  ClockChangeEvent,
  ClockSource,
  Decision,
  DecisionSource,
  FailMode,
  FallbackOptions,
  LimitAllOptions,
  Limiter,
  LimiterOptions,
  LimitRequest,
  MultiDecision,
  RefundOutcome,
  RefundReceipt,
  RequestIdConflict,
  ResetOutcome,
  ResetRequest,
} from "./limiter/types";
export type {
  BlocksRefreshFailed,
  NetworkBlockHit,
  NetworkBlocks,
  NetworkIdentity,
} from "./net/network-blocks";
export type { RequestBlock } from "./rules/blocked-request";
export type { ShadowDenyEvent } from "./rules/decide";
export type { RefundFailedEvent } from "./rules/refund-on-error";
export { ALGORITHMS, type Algorithm } from "./store/algorithm";
export { PolicyBoundsError } from "./store/script-inputs";
export {
  createStoreClient,
  type StoreClient,
  type StoreClientOptions,
} from "./store/upstash-client";
