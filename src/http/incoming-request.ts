/**
 * What a surface reads of an incoming request before its rules are decided, in one pass: its
 * request id (a retry is counted once), its network identity (what network blocks match) and
 * what its region is picked by (`request.cf`). Client keys are rules/'s (client-key.ts).
 */
import type { ClientIpConfig } from "../config/client-ip-config";
import { MAX_REQUEST_ID_LENGTH } from "../config/limits";
import type { NetworkIdentity } from "../net/network-blocks";
import { trustedAddress } from "../rules/client-key";

/** What Cloudflare's edge sets on `request.cf` that the limiter reads (absent locally). */
export interface RequestCf {
  colo?: unknown;
  continent?: unknown;
  country?: unknown;
  asn?: unknown;
}

/** The request's `cf` object, when its runtime set one. */
export function requestCf(request: Request): RequestCf | undefined {
  return (request as { cf?: RequestCf }).cf;
}

/**
 * The request's network identity: its country and AS number as Cloudflare's edge set them, and
 * the client's address as the trusted header of `addressHeaders` gives it, ungrouped (a block
 * may be narrower than the grouping the rules count by).
 */
export function requestNetwork(
  request: Request,
  addressHeaders: Headers,
  clientIp: ClientIpConfig,
): NetworkIdentity {
  const cf = requestCf(request);
  return {
    country: typeof cf?.country === "string" ? cf.country : undefined,
    asn: typeof cf?.asn === "number" ? cf.asn : undefined,
    ip: trustedAddress(addressHeaders, clientIp),
  };
}

/** The request id: the value of the first configured header present (bounded in length). */
export function requestIdFrom(headers: Headers, names: readonly string[]): string | undefined {
  for (const name of names) {
    const value = headers.get(name)?.trim();
    if (value) return value.length > MAX_REQUEST_ID_LENGTH ? undefined : value;
  }
  return undefined;
}
