/**
 * The Redis key layout: a policy's key per client key and algorithm, a request id's record, and a
 * policy key's reset mark.
 * Total over any string (no client input can throw here) and injective.
 */
import { LONE_SURROGATE } from "../utf16";
import { type Algorithm, isLogAlgorithm } from "./algorithm";

/**
 * Redis key layout: `<prefix>:<policy>:{<client key>}` (`<policy>/<algorithm>` for algorithms
 * other than the log).
 *
 * The client key is percent-encoded (encodeKeyPart), which is injective and leaves no `:`,
 * `{` or `}` in it: no client key can impersonate another key or policy, and the braces around it
 * are the only hash tag, so every policy of one client key lands in one Redis Cluster slot.
 * Policy names are restricted to POLICY_NAME by their validators, so they hold no separator.
 */
export function storageKey(
  prefix: string,
  policy: string,
  clientKey: string,
  algorithm: Algorithm = "sliding-log",
): string {
  // The other algorithms get their own key (`<policy>/<algorithm>`; `/` is not in policy names):
  // a rule whose algorithm changes must not read another algorithm's state (a sorted set where a
  // string is expected fails with WRONGTYPE; one string format misread as another resets counts).
  // The log keeps the unsuffixed key it always had.
  const name = isLogAlgorithm(algorithm) ? policy : `${policy}/${algorithm}`;
  return `${prefix}:${name}:{${encodeKeyPart(clientKey)}}`;
}

/**
 * What a policy (rule) name may be: it is part of every Redis key and of the headers, so no
 * separator (`:`, `{`, `/`) and nothing a header cannot carry. The config, /check and the limiter
 * refuse any other name (config/limits.ts re-exports it).
 */
export const POLICY_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * The key holding a request id's stored decision: the first policy key (so it shares that key's
 * hash slot), the percent-encoded request id, and the other policy keys (the same id with another
 * set of policies is another evaluation, with another reply shape).
 */
export function requestRecordKey(policyKeys: readonly string[], requestId: string): string {
  const [first = "", ...others] = policyKeys;
  const scope = others.length > 0 ? `:${others.join("|")}` : "";
  return `${first}:rid:${encodeKeyPart(requestId)}${scope}`;
}

/**
 * The key of a policy key's reset mark: `<policy key>:reset`, in the policy key's hash slot.
 * A reset (peek-reset.ts) writes a fresh random token there; a request-id record remembers the
 * marks it was written under, and one that finds a mark it did not see is forgotten (the reset
 * came after it). Resetting cannot delete the records themselves: they live under the first
 * policy key of each call and are not findable without SCAN.
 */
export function resetMarkKey(policyKey: string): string {
  return `${policyKey}:reset`;
}

/**
 * A usage request's once-gate (lua/settle-driver.lua.ts): taken by its first settle, on a fixed
 * window or a period (which keep counts, no entry to mark). Beside its first such policy's key,
 * so on that key's shard and in its hash slot; `memberId` is unique per admission.
 */
export function settleGateKey(policyKey: string, memberId: string): string {
  return `${policyKey}:settled:${encodeKeyPart(memberId)}`;
}

/**
 * The longest a request-id record is kept (the longest window the config takes, 7 days, plus the
 * caller-clock grace), and so how long a reset mark is: a mark must outlive every record written
 * before it (no window is longer: caps.ts MAX_WINDOW_MS).
 */
export const RECORD_TTL_MAX_MS = 7 * 86_400_000 + 1_000;

/**
 * encodeURIComponent for ANY JavaScript string, never throwing. encodeURIComponent throws a
 * URIError on a string that is not well-formed UTF-16 (a lone surrogate), and keys are built on
 * the request path from what a client sent: a throw there once made the limiter count a client's
 * string as a store failure. A lone surrogate is written `%uD800` instead: percent-encoding only
 * ever writes `%` and two hex digits (a literal `%` becomes `%25`), so `%u` comes from nothing
 * else and the encoding stays injective: every distinct string is its own key.
 */
export function encodeKeyPart(value: string): string {
  try {
    return encodeURIComponent(value);
  } catch {
    return (
      value
        // The captured parts (odd indexes) are exactly the lone surrogates.
        .split(LONE_SURROGATE)
        .map((part, i) =>
          i % 2 === 1
            ? `%u${part.charCodeAt(0).toString(16).toUpperCase()}`
            : encodeURIComponent(part),
        )
        .join("")
    );
  }
}

/**
 * How far ahead of the store's now a log admission may be stamped: a lease's units are stamped at
 * its end (see the evaluate script's ARGV[5]): an isolate lease's at most 1 s, a regional lease's
 * at most 10 s (docs/regions.md).
 */
export const STAMP_AHEAD_MAX_MS = 10_000;
