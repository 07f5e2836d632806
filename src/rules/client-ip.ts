/**
 * The client's address as a rate-limit key: which header to trust for it (Cloudflare's, or the
 * proxy you run) and how addresses are grouped (IPv4 by prefix, IPv6 by /64). Also what /check
 * applies to an "ip" key it is given.
 */
import type { ClientIpConfig } from "../config/client-ip-config";
import { groupAddress } from "../net/ip-address";

/** The grouped client address, or undefined when there is none to trust. */
export function clientIp(headers: Headers, config: ClientIpConfig): string | undefined {
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
export function missingIpReason(headers: Headers, config: ClientIpConfig): string {
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
