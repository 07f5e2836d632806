/**
 * LIMITER_CONFIG's `clientIp` (and the middleware's `clientIp` option): where "ip" keys come from
 * and how addresses are grouped. The type is the schema's output, documented on its entries.
 */
import * as v from "valibot";
import { integerIn, plainObject } from "./schema-parts";

/** The client-IP defaults, for the config schema, the middleware and /check alike. */
export const DEFAULT_CLIENT_IP = {
  trustedProxyHops: 1,
  ipv6PrefixLength: 64,
  ipv4PrefixLength: 32,
} as const;

export const clientIpSchema = plainObject(
  {
    /**
     * A header set by a proxy you run in front of the worker, trusted instead of CF-Connecting-IP
     * (any case; read lower-cased). Unset, only CF-Connecting-IP is read: any client can forge
     * the others.
     * @default undefined
     */
    trustedProxyHeader: v.optional(
      v.pipe(
        v.string(),
        v.toLowerCase(),
        v.picklist(
          ["x-forwarded-for", "x-real-ip", "true-client-ip"],
          'must be "X-Forwarded-For", "X-Real-IP" or "True-Client-IP"',
        ),
      ),
    ),
    /** For X-Forwarded-For: how many of your proxies append to it (the entry this far from the right). @default 1 */
    trustedProxyHops: v.optional(integerIn(1, 16), DEFAULT_CLIENT_IP.trustedProxyHops),
    /** IPv6 addresses are grouped by this prefix: one subscriber owns a whole /64. @default 64 */
    ipv6PrefixLength: v.optional(integerIn(1, 128), DEFAULT_CLIENT_IP.ipv6PrefixLength),
    /** IPv4 addresses are grouped by this prefix. @default 32 */
    ipv4PrefixLength: v.optional(integerIn(1, 32), DEFAULT_CLIENT_IP.ipv4PrefixLength),
  },
  "must be an object",
);

/** Where "ip" keys come from and how addresses are grouped, as read (defaults filled in). */
export type ClientIpConfig = v.InferOutput<typeof clientIpSchema>;
