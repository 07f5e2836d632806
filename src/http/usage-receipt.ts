/**
 * The receipt /check hands out for a usage request (docs/usage.md): an opaque string that
 * `POST /check/settle` takes back. It holds what the settle needs of each usage rule the request
 * was admitted in (the rule, its Redis key and counts, the member id, the shard that admitted it)
 * and an HMAC-SHA-256 over it, keyed by a secret of the deployment: a settle charges or gives back
 * only what a /check of this deployment admitted, never a key a caller names.
 */

import type { CountedReceipt } from "../limiter/receipt-state";
import { denialCacheKey, type ResolvedPolicy } from "../limiter/resolved-policy";
import type { RefundReceipt } from "../limiter/types";

/** The longest receipt /check/settle reads (16 usage rules with long keys fit). */
export const MAX_RECEIPT_LENGTH = 6_000;

// One usage rule of a receipt: shard, member id, time, rule, client key, limit, window, cost, Redis key.
type Entry = [string, string, number, string, string, number, number, number, string];

const encoder = new TextEncoder();

function base64url(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64url(text: string): Uint8Array | undefined {
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

/** Every usage rule (weighted log) of a receipt, with the shard and member that counted it. */
function usageEntries(receipt: CountedReceipt, shard: string): Entry[] {
  if (receipt.parts) {
    return receipt.parts.flatMap((part) => usageEntries(part.receipt, part.shard));
  }
  return receipt.resolved
    .filter((policy) => policy.algorithm === "sliding-log-weighted")
    .map((p) => [
      receipt.shard ?? shard,
      receipt.memberId,
      receipt.at,
      p.name,
      p.clientKey,
      p.limit,
      p.windowMs,
      p.cost,
      p.redisKey,
    ]);
}

/** The receipt to hand out, or undefined when the request holds no usage rule. */
export async function sealReceipt(
  receipt: RefundReceipt,
  secret: string,
): Promise<string | undefined> {
  const entries = usageEntries(receipt as CountedReceipt, "");
  if (entries.length === 0) return undefined;
  const body = base64url(encoder.encode(JSON.stringify(entries)));
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
  const entries = JSON.parse(new TextDecoder().decode(bytes)) as Entry[];
  // One part per shard and member (a sharded request counted on several shards).
  const parts = new Map<string, CountedReceipt>();
  for (const [shard, memberId, at, name, clientKey, limit, windowMs, cost, redisKey] of entries) {
    const id = `${shard}\n${memberId}`;
    let part = parts.get(id);
    if (!part) {
      part = { memberId, at, policies: [], costs: [], resolved: [], ...(shard ? { shard } : {}) };
      parts.set(id, part);
    }
    const algorithm = "sliding-log-weighted";
    const policy: ResolvedPolicy = {
      name,
      clientKey,
      algorithm,
      limit,
      windowMs,
      cost,
      failMode: "open",
      cacheKey: denialCacheKey({ policy: name, key: clientKey, limit, windowMs, algorithm }),
      lease: false,
      overrides: false,
      redisKey,
    };
    part.policies.push(name);
    part.costs.push(cost);
    (part.resolved as ResolvedPolicy[]).push(policy);
  }
  const all = [...parts.values()];
  if (all.length === 1) return all[0];
  const [first] = all as [CountedReceipt];
  return {
    ...first,
    parts: all.map((receipt) => ({ shard: receipt.shard ?? "", indices: [], receipt })),
  };
}
