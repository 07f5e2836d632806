/**
 * What a user calls: `import { rateLimit } from "edge-limiter"` (docs/development.md "Public
 * API" lists every name; test/repo/public-api.test.ts holds this file to that list). The values,
 * and the types they take and return:
 * - `rateLimit()`: the Hono middleware, and `fromEnv`, its store from the bindings;
 * - `createLimiter()`: the limiter, to decide in your own code; what is done to its keys
 *   besides deciding (peek, reset, overrides, key and network blocks) are its methods;
 * - `createStoreClient()`: the @upstash/redis client configured for the request path;
 * - `createAnalytics()`: per-rule counts of a limiter's decisions (`onDecision`);
 * - the errors `MissingStoreSettingError` and `PolicyBoundsError`.
 * An HTTP surface of your own (the worker in this repository is one) builds on
 * `edge-limiter/server` (server.ts). Everything else in src/ is internal and may change in any
 * release.
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
export type { CalendarPeriod, PeriodUnit } from "./limiter/calendar-period";
export type { BreakerEvent } from "./limiter/circuit-breaker";
export { createLimiter } from "./limiter/create-limiter";
export type { LeaseOptions } from "./limiter/leases/lease-sizing";
export type { Limiter } from "./limiter/limiter-api";
export type { FallbackOptions, LimiterOptions, RegionsOptions } from "./limiter/limiter-options";
export type { NetworkBlocksOptions } from "./limiter/network-block-copies";
export type { Peek } from "./limiter/peek";
export type {
  KeyBlocksAdmin,
  NetworkBlock,
  NetworkBlocksAdmin,
  NetworkChange,
  Overrides,
  PlanChange,
  PlanKey,
} from "./limiter/plan-changes";
export type { PlanEntry, PlanListing, PlanPage, Plans } from "./limiter/plan-listing";
export type { ResetOutcome, ResetRequest } from "./limiter/reset";
export type { ReshardOptions, StoreShards } from "./limiter/shards/options";
export type { ShardPlacement, ShardState } from "./limiter/shards/types";
export type {
  ConcurrencySlot,
  Decision,
  DecisionSource,
  FailMode,
  LimitAllOptions,
  LimitRequest,
  MultiDecision,
  RefundOutcome,
  RefundReceipt,
  ReleaseOutcome,
  RequestIdConflict,
} from "./limiter/types";
export {
  type RateLimitOptions,
  type RateLimitResult,
  type RateLimitVariables,
  rateLimit,
} from "./middleware/middleware";
export {
  fromEnv,
  type MiddlewareLimiterOptions,
  MissingStoreSettingError,
  type StoreConfig,
  type StoreInput,
} from "./middleware/middleware-store";
export type { RateLimitRule } from "./middleware/per-request-rules";
export type {
  BlocksRefreshFailed,
  NetworkBlockHit,
  NetworkBlocks,
  NetworkIdentity,
} from "./net/network-blocks";
export type { ShadowDenyEvent } from "./rules/decide";
export type { RequestBlock } from "./rules/outcome";
export type { RefundFailedEvent } from "./rules/refund-on-error";
export type { Algorithm } from "./store/algorithm";
export { PolicyBoundsError } from "./store/script-inputs";
export type { ClockChangeEvent, ClockSource } from "./store/store-clock";
export {
  createStoreClient,
  type StoreClient,
  type StoreClientOptions,
} from "./store/upstash-client";
