/**
 * The receipt /check hands out for a usage request (docs/usage.md): an opaque string that
 * `POST /check/settle` takes back. It holds what the settle needs of each usage rule the request
 * was admitted in (the rule, its Redis key and counts, the member id, the shard that admitted it)
 * and an HMAC-SHA-256 over it, keyed by a secret of the deployment: a settle charges or gives back
 * only what a /check of this deployment admitted, never a key a caller names.
 */

import { type PeriodUnit, periodAt } from "../limiter/calendar-period";
import type { CountedReceipt } from "../limiter/receipt-state";
import { denialCacheKey, type ResolvedPolicy } from "../limiter/resolved-policy";
import { isUsagePolicy } from "../limiter/settle-receipt";
import type { RefundReceipt } from "../limiter/types";
import type { Algorithm } from "../store/algorithm";

/**
 * The longest receipt /check/settle reads. The longest /check hands out is ~6 500 characters:
 * 16 usage rules with 64-character names, and a 512-character key that JSON escapes to 6 bytes
 * a character (control characters), base64 adding a third. Above it with room for a reshard's
 * second shard, below what the 8 KiB settle body can carry.
 */
export const MAX_RECEIPT_LENGTH = 8_000;

// What a receipt holds, compact: the client keys once each (a /check's rules share one key, raw,
// grouped or hashed), then per shard and member the usage rules counted there: rule, key index,
// limit, window, cost. The Redis keys are not in it: the limiter builds them from its prefix.
interface Sealed {
  k: string[];
  g: [shard: string, memberId: string, at: number, rules: Rule[]][];
}
type Rule = [
  name: string,
  key: number,
  limit: number,
  windowMs: number,
  cost: number,
  // Absent: the weighted log (a receipt from before offsets); a number: the weighted log, where
  // its entry went (its settle writes there). "f": a fixed window. A calendar period: its unit,
  // zone and anchor, and the start and end of the period the request was counted in.
  counted?:
    | number
    | "f"
    | [unit: PeriodUnit, timezone: string, anchor: number | null, start: number, end: number],
];

const encoder = new TextEncoder();

function base64url(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64url(text: string): Uint8Array<ArrayBuffer> | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return undefined;
  try {
    const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  } catch {
    return undefined;
  }
}

// One key per secret and isolate: importing it costs more than signing.
const keys = new Map<string, Promise<CryptoKey>>();
function hmacKey(secret: string): Promise<CryptoKey> {
  let key = keys.get(secret);
  if (!key) {
    if (keys.size > 4) keys.clear();
    key = crypto.subtle.importKey(
      "raw",
      encoder.encode(`edge-limiter usage receipt\n${secret}`),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign", "verify"],
    );
    keys.set(secret, key);
  }
  return key;
}

/** Every usage rule (weighted log) of a receipt, by the shard and member that counted it. */
function collect(receipt: CountedReceipt, shard: string, into: Sealed): void {
  if (receipt.parts) {
    for (const part of receipt.parts) collect(part.receipt, part.shard, into);
    return;
  }
  const rules: Rule[] = [];
  for (const [i, p] of receipt.resolved.entries()) {
    if (!isUsagePolicy(p)) continue;
    let key = into.k.indexOf(p.clientKey);
    if (key < 0) key = into.k.push(p.clientKey) - 1;
    const rule: Rule = [p.name, key, p.limit, p.windowMs, p.cost];
    const offset = receipt.offsets?.[i] ?? -1;
    if (p.algorithm === "sliding-log-weighted" && offset >= 0) rule.push(offset);
    if (p.algorithm === "fixed-window") rule.push("f");
    if (p.algorithm === "calendar" && p.period) {
      const { unit, timezone, anchor } = p.period;
      const [start, end] = periodOf(p, receipt.at);
      rule.push([unit, timezone, anchor ?? null, start, end]);
    }
    rules.push(rule);
  }
  if (rules.length > 0) into.g.push([receipt.shard ?? shard, receipt.memberId, receipt.at, rules]);
}

/**
 * The period a calendar policy counted a request in: of the starts its evaluation sent (computed
 * with the key's own anchor when the plans gave one), the one that holds the store's `at`.
 */
function periodOf(policy: ResolvedPolicy, at: number): [number, number] {
  const starts = policy.periodStarts ?? [];
  for (let i = 0; i + 1 < starts.length; i++) {
    const [start, end] = [starts[i] as number, starts[i + 1] as number];
    if (start <= at && at < end) return [start, end];
  }
  const { start, end } = periodAt(policy.period as NonNullable<ResolvedPolicy["period"]>, at);
  return [start, end];
}

/** The receipt to hand out, or undefined when the request holds no usage rule. */
export async function sealReceipt(
  receipt: RefundReceipt,
  secret: string,
): Promise<string | undefined> {
  const sealed: Sealed = { k: [], g: [] };
  collect(receipt as CountedReceipt, "", sealed);
  if (sealed.g.length === 0) return undefined;
  const body = base64url(encoder.encode(JSON.stringify(sealed)));
  const mac = await crypto.subtle.sign("HMAC", await hmacKey(secret), encoder.encode(body));
  return `${body}.${base64url(new Uint8Array(mac))}`;
}

/** A receipt handed out with `secret`, as the limiter's settle takes it; undefined if not one. */
export async function openReceipt(
  text: string,
  secret: string,
): Promise<CountedReceipt | undefined> {
  const [body = "", mac = "", extra] = text.split(".");
  const signature = fromBase64url(mac);
  if (extra !== undefined || !signature) return undefined;
  const key = await hmacKey(secret);
  if (!(await crypto.subtle.verify("HMAC", key, signature, encoder.encode(body)))) return undefined;
  const bytes = fromBase64url(body);
  if (!bytes) return undefined;
  const sealed = JSON.parse(new TextDecoder().decode(bytes)) as Sealed;
  // One part per shard and member (a sharded request counted on several shards).
  const parts: CountedReceipt[] = [];
  for (const [shard, memberId, at, rules] of sealed.g) {
    const part: CountedReceipt = {
      memberId,
      at,
      policies: [],
      costs: [],
      resolved: [],
      offsets: [],
      ...(shard ? { shard } : {}),
    };
    for (const [name, key, limit, windowMs, cost, counted] of rules) {
      const clientKey = sealed.k[key] as string;
      const algorithm: Algorithm =
        counted === undefined || typeof counted === "number"
          ? "sliding-log-weighted"
          : counted === "f"
            ? "fixed-window"
            : "calendar";
      const period = Array.isArray(counted)
        ? {
            unit: counted[0],
            timezone: counted[1],
            ...(counted[2] !== null ? { anchor: counted[2] } : {}),
          }
        : undefined;
      const request = {
        policy: name,
        key: clientKey,
        limit,
        windowMs,
        algorithm,
        ...(period ? { period } : {}),
      };
      const policy: ResolvedPolicy = {
        name,
        clientKey,
        algorithm,
        limit,
        windowMs,
        cost,
        failMode: "open",
        cacheKey: denialCacheKey(request),
        lease: false,
        overrides: false,
        // Built by the limiter that settles it, from its own prefix.
        redisKey: "",
      };
      if (counted !== undefined && typeof counted !== "number") policy.usage = true;
      (part.offsets as number[]).push(typeof counted === "number" ? counted : -1);
      if (Array.isArray(counted) && period) {
        policy.period = period;
        policy.periodStarts = [counted[3], counted[4]];
      }
      part.policies.push(name);
      part.costs.push(cost);
      (part.resolved as ResolvedPolicy[]).push(policy);
    }
    parts.push(part);
  }
  const all = parts;
  if (all.length === 1) return all[0];
  const [first] = all as [CountedReceipt];
  return {
    ...first,
    parts: all.map((receipt) => ({ shard: receipt.shard ?? "", indices: [], receipt })),
  };
}
