/** The worker's bindings (wrangler.toml vars and secrets); an unset one reads as undefined. */
export interface Env {
  /** Upstash REST endpoint (or the local bridge). Secret. */
  UPSTASH_REDIS_REST_URL?: string | undefined;
  /** Upstash REST token. Secret. */
  UPSTASH_REDIS_REST_TOKEN?: string | undefined;
  /**
   * Bearer token of the decisions, POST /check and /check/peek; without it they are closed to
   * all but the admin token. Secret.
   */
  LIMITER_TOKEN?: string | undefined;
  /**
   * Bearer token of the admin routes (reset, override, block, unblock, plans, stats, the
   * dashboard), also accepted wherever LIMITER_TOKEN is; without it the admin routes are
   * closed. Secret.
   */
  LIMITER_ADMIN_TOKEN?: string | undefined;
  /** Rules and knobs: a JSON string or a TOML table (docs/configuration.md). */
  LIMITER_CONFIG?: string | Record<string, unknown> | undefined;
  /**
   * Workers Analytics Engine dataset (`analytics_engine_datasets` in wrangler.toml), used when
   * LIMITER_CONFIG's `analytics.sinks` names "analytics-engine".
   */
  LIMITER_ANALYTICS?: AnalyticsEngineDataset | undefined;
  /**
   * Pins this worker to one of LIMITER_CONFIG's `regions` (docs/regions.md); otherwise a
   * request's region comes from `request.cf`.
   */
  LIMITER_REGION?: string | undefined;
  /** Each region's store: `UPSTASH_REDIS_REST_URL_<SUFFIX>` and `_TOKEN_<SUFFIX>`. */
  [binding: `UPSTASH_REDIS_REST_${"URL" | "TOKEN"}_${string}`]: string | undefined;
  /** Where the proxy forwards allowed requests locally (production forwards to the request URL). */
  ORIGIN_URL?: string | undefined;
}
