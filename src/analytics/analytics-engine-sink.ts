/**
 * The Workers Analytics Engine sink: one data point per rule decision, for Cloudflare's SQL API
 * and Grafana (docs/analytics.md has a sample query). Written synchronously
 * (writeDataPoint queues it; the runtime sends it after the response).
 *
 * Data point: index1 = rule (the sampling key); blob1 rule, blob2 source, blob3 outcome
 * ("allowed", "denied", "shadow-denied", "not-counted": another rule denied the request),
 * blob4 client key (cut to 128 characters; a header rule's key is already a SHA-256);
 * double1 cost, double2 1 (sum it for a count that survives sampling via _sample_interval).
 */
import type { DecisionSource } from "../limiter/types";
import { MAX_KEY_LENGTH, type Outcome } from "./aggregate";
import type { AnalyticsEngineDatasetLike } from "./types";

export function writeDecisionPoint(
  dataset: AnalyticsEngineDatasetLike,
  policy: string,
  source: DecisionSource,
  outcome: Outcome,
  key: string,
  cost: number,
): void {
  dataset.writeDataPoint({
    indexes: [policy],
    blobs: [
      policy,
      source,
      outcome,
      key.length > MAX_KEY_LENGTH ? key.slice(0, MAX_KEY_LENGTH) : key,
    ],
    doubles: [cost, 1],
  });
}
