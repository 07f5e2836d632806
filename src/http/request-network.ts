/** What network blocks read of an incoming request besides its address: `request.cf`. */
import type { NetworkIdentity } from "../net/network-blocks";

/** The request's country and AS number as Cloudflare's edge set them (absent locally). */
export function requestNetwork(request: Request): Omit<NetworkIdentity, "ip"> {
  const cf = (request as { cf?: { country?: unknown; asn?: unknown } }).cf;
  return {
    country: typeof cf?.country === "string" ? cf.country : undefined,
    asn: typeof cf?.asn === "number" ? cf.asn : undefined,
  };
}
