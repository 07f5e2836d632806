/**
 * The client key a rule counts a request under, read from the request's headers by the rule's
 * `key` spec: a header's value (hashed), or the client's address, taken from the header you
 * trust for it (Cloudflare's, or the proxy you run) and grouped (IPv4 by prefix, IPv6 by /64;
 * net/ip-address.ts). Network blocks match the same trusted address, ungrouped.
 */
import { MAX_KEY_LENGTH } from "../bounded-key";
import type { ClientIpConfig } from "../config/client-ip-config";
import type { RuleConfig } from "../config/rule-schema";
import { digestHex } from "../digest";
import { groupAddress } from "../net/ip-address";
import { ownedString, stringBytes } from "../owned-string";
import type { RulesOutcome } from "./outcome";

/** The client key of every request that lacks key material, under `missingKey: "shared"`. */
const MISSING_KEY = "(missing)";

/** A request's rules, each with the client key it counts under. */
export interface KeyedRules {
  keyed: { rule: RuleConfig; key: string }[];
}

/**
 * Every rule's client key for one request, in rule order: a rule without key material counts
 * under MISSING_KEY (`missingKey: "shared"`), drops out (`"skip"`) or refuses the request
 * (`"deny"`: `missing` names the rule and why, and nothing is counted anywhere). `keyOf` (the
 * middleware's key function) replaces every rule's spec.
 */
export async function ruleKeys(
  rules: readonly RuleConfig[],
  headers: Headers,
  clientIp: ClientIpConfig,
  keyOf: ((rule: RuleConfig) => Promise<string | undefined>) | undefined,
): Promise<KeyedRules | { missing: NonNullable<RulesOutcome["missingKey"]> }> {
  const keyed: KeyedRules["keyed"] = [];
  // One derivation per key spec: rules sharing "header:x-api-key" hash the header once.
  const bySpec = new Map<string, Promise<string | undefined>>();
  for (const rule of rules) {
    let key: string | undefined;
    if (keyOf) key = await keyOf(rule);
    else {
      let derived = bySpec.get(rule.key);
      if (!derived) {
        derived = clientKey(rule.key, headers, clientIp);
        bySpec.set(rule.key, derived);
      }
      key = await derived;
    }
    if (key !== undefined) keyed.push({ rule, key });
    else if (rule.missingKey === "shared") keyed.push({ rule, key: MISSING_KEY });
    else if (rule.missingKey === "deny") {
      return {
        missing: {
          rule: rule.name,
          key: rule.key,
          // A key function overrides the rule's spec: it, not the spec's header, found nothing.
          reason: keyOf
            ? "the app's key function returned no key"
            : missingKeyReason(rule.key, headers, clientIp),
        },
      };
    }
    // "skip": the rule does not apply to this request.
  }
  return { keyed };
}

/** The grouped client address, or undefined when there is none to trust. */
function clientIp(headers: Headers, config: ClientIpConfig): string | undefined {
  const raw = trustedAddress(headers, config);
  if (raw === undefined) return undefined;
  return groupAddress(raw, config);
}

/** The client's address as the trusted header gives it, ungrouped (what network blocks match). */
export function trustedAddress(headers: Headers, config: ClientIpConfig): string | undefined {
  const header = config.trustedProxyHeader;
  if (header) {
    const value = headers.get(header);
    if (value !== null) {
      if (header !== "x-forwarded-for") return value.trim();
      // Each proxy appends the address it saw: the entry `hops` from the right was written by
      // the outermost proxy you run; anything left of it is the client's to forge.
      const entries = value.split(",").map((entry) => entry.trim());
      return entries[entries.length - config.trustedProxyHops];
    }
    // No header: the request did not come through the proxy; fall back to the connecting IP.
  }
  return headers.get("cf-connecting-ip")?.trim() || undefined;
}

/**
 * Why clientIp found no address, in words a 400 can carry: which header was absent, short of
 * entries or not an address. Follows trustedAddress step by step; only called on that refusal.
 */
function missingIpReason(headers: Headers, config: ClientIpConfig): string {
  const header = config.trustedProxyHeader;
  if (header) {
    const value = headers.get(header);
    if (value !== null) {
      if (header !== "x-forwarded-for")
        return `${header} (the trusted proxy header) is not an IP address`;
      const hops = config.trustedProxyHops;
      return value.split(",").length < hops
        ? `${header} has fewer than ${hops} entries`
        : `${header} entry ${hops} from the right is not an IP address`;
    }
    if (!headers.get("cf-connecting-ip")?.trim()) {
      return `neither ${header} (the trusted proxy header) nor CF-Connecting-IP is present`;
    }
  } else if (!headers.get("cf-connecting-ip")?.trim()) {
    return "no CF-Connecting-IP header";
  }
  return "CF-Connecting-IP is not an IP address";
}

/**
 * The client key a rule's `key` spec names, derived from the request's headers:
 * - "ip": the client address from CF-Connecting-IP (set by Cloudflare, not forgeable by the
 *   client), or from `clientIp.trustedProxyHeader` when a proxy you run sits in front. IPv4 as
 *   "203.0.113.7" (or "203.0.113.0/24" under a shorter prefix); IPv6 grouped by its /64 (one
 *   subscriber owns a whole /64, so per-address keys would be free to rotate) as
 *   "2001:db8:1:2::/64". IPv4-mapped IPv6 counts as IPv4.
 * - "header:<name>": the SHA-256 (hex) of the header's first value (see headerKeyValue): API
 *   keys and tokens never reach Redis (keys, MONITOR, slowlog) in the clear, and a key of any
 *   length is 64 characters wherever it is kept.
 * - "global": "global" (one log for everyone).
 * Undefined when the request lacks the material (no such header, no parseable address): the
 * rule's `missingKey` decides what happens then.
 */
export async function clientKey(
  spec: string,
  headers: Headers,
  ip: ClientIpConfig,
): Promise<string | undefined> {
  if (spec === "global") return "global";
  if (spec.startsWith("header:")) {
    const value = headerKeyValue(headers.get(spec.slice("header:".length)));
    return value === undefined ? undefined : hashedHeaderKey(value);
  }
  return spec === "ip" ? clientIp(headers, ip) : undefined;
}

/** Most header values whose SHA-256 an isolate remembers (the oldest leaves first). */
export const HEADER_KEY_CACHE_SIZE = 1024;

/**
 * Most bytes those entries may occupy (each: the value and its digest at 2 bytes a character,
 * plus HEADER_KEY_ENTRY_BYTES); the oldest leave first.
 */
export const HEADER_KEY_CACHE_BYTES = 1024 * 1024;

/** An entry besides its two strings: the Map slot, rounded up. */
const HEADER_KEY_ENTRY_BYTES = 64;

// Per isolate: a client sends the same key on every request, and its digest cost an async Web
// Crypto call, a TextEncoder and a hex loop per proxied request. Strings only (no
// I/O object, nothing tied to a request). Bounded in entries and in bytes: a flood of one-off
// values cannot grow it, nor can a few huge ones. Only values up to MAX_KEY_LENGTH are kept (an
// API key or a token; a longer value is hashed on every request, never held), and each as a copy:
// the value is cut from the header (split, trim), and a cut keeps the whole header alive.
const headerKeys = new Map<string, string>();
let headerKeyBytes = 0;

const entryBytes = (value: string, hex: string) =>
  stringBytes(value) + stringBytes(hex) + HEADER_KEY_ENTRY_BYTES;

/** The SHA-256 (hex) of a header key's value, from the per-isolate cache when it is there. */
async function hashedHeaderKey(value: string): Promise<string> {
  const known = headerKeys.get(value);
  if (known !== undefined) return known;
  const hex = await digestHex("SHA-256", value);
  if (value.length > MAX_KEY_LENGTH) return hex;
  const owned = ownedString(value);
  headerKeyBytes += entryBytes(owned, hex);
  headerKeys.set(owned, hex);
  // First in, first out: no reordering on a hit (a Map delete + set per request).
  while (headerKeys.size > HEADER_KEY_CACHE_SIZE || headerKeyBytes > HEADER_KEY_CACHE_BYTES) {
    const oldest = headerKeys.entries().next();
    if (oldest.done) break;
    headerKeys.delete(oldest.value[0]);
    headerKeyBytes -= entryBytes(oldest.value[0], oldest.value[1]);
  }
  return hex;
}

/**
 * The key a `"header:<name>"` rule counts a raw header value under, as the proxy and the
 * middleware derive it: the value's first element (headerKeyValue), hashed. /check, peek and
 * reset take the raw value and key it so, to reach the same log.
 */
export function headerRuleKey(raw: string): Promise<string> {
  return hashedHeaderKey(headerKeyValue(raw) ?? raw);
}

/**
 * The raw value a header rule's key (its SHA-256) was hashed from, while this isolate still holds
 * it in the cache above (a scan of at most HEADER_KEY_CACHE_SIZE entries: for the dashboard's few
 * top keys at a flush, never per request). Undefined once it left, or for any other key.
 */
export function headerKeyLabel(key: string): string | undefined {
  if (key.length !== 64) return undefined;
  for (const [value, hex] of headerKeys) if (hex === key) return value;
  return undefined;
}

/** How many header values the cache holds now (tests check its bound). */
export function headerKeyCacheSize(): number {
  return headerKeys.size;
}

/** Bytes the cache holds now, as HEADER_KEY_CACHE_BYTES counts them (tests check its bound). */
export function headerKeyCacheBytes(): number {
  return headerKeyBytes;
}

/**
 * Why clientKey found no key for `spec`, in words a 400 can carry (missingKey "deny"): the
 * header that is absent or holds only blanks and commas, or what the address lacks. Only called
 * on that refusal, so the hot path stays clientKey alone.
 */
function missingKeyReason(spec: string, headers: Headers, ip: ClientIpConfig): string {
  if (spec === "ip") return missingIpReason(headers, ip);
  if (spec.startsWith("header:")) {
    const name = spec.slice("header:".length);
    return headers.get(name) === null
      ? `header ${name} is absent`
      : `header ${name} holds only blanks and commas`;
  }
  return `"${spec}" is not a key spec`;
}

/**
 * The value a header key is read from: the first non-empty element of the comma-separated list,
 * trimmed. Headers joins a repeated header with ", ", and origins read the first copy (Go's
 * Header.Get, the servlet getHeader, nginx's $http_*) and, per RFC 9110 §5.6.1, ignore empty
 * elements and the blanks around them. So `K, junk`, `K,`, ` , K` and `K` sent twice all land in
 * K's bucket: treating them as missing would let a client escape a `"skip"` rule (or drain the
 * `"shared"` one) with a key the origin still accepts, and hashing the whole value would give it a
 * fresh bucket per request. Case and inner characters are kept: `k` is another key to the origin.
 * Undefined when there is no such element (absent, blank or only commas).
 */
function headerKeyValue(raw: string | null): string | undefined {
  if (raw === null) return undefined;
  for (const element of raw.split(",")) {
    const value = element.trim();
    if (value !== "") return value;
  }
  return undefined;
}
