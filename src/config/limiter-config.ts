// Moved: the rule shape is in rule-schema.ts, clientIp in client-ip-config.ts, the worker's
// LIMITER_CONFIG in worker-config.ts. Re-exported here until every import names them.
export { type ClientIpConfig, DEFAULT_CLIENT_IP } from "./client-ip-config";
export type {
  MissingKeyOutcome,
  RefundOn,
  RuleConfig,
  RuleInput,
  RuleMatch,
} from "./rule-schema";
export {
  type ParseWorkerConfigOptions,
  parseRules,
  parseWorkerConfig,
  parseWorkerConfig as parseLimiterConfig,
  type WorkerConfig,
  type WorkerConfig as LimiterConfig,
} from "./worker-config";
