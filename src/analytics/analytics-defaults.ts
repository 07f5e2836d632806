/**
 * The analytics' defaults, a leaf: config/ reads them for LIMITER_CONFIG's `analytics` without
 * loading the recorder.
 */
export const DEFAULT_FLUSH_INTERVAL_MS = 5_000;
export const DEFAULT_RETENTION_MINUTES = 1_440;
export const DEFAULT_TOP_KEYS = 10;
