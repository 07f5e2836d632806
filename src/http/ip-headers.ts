/** The headers a middleware request's "ip" rules read its client address from. */
import type { Context, Env as HonoEnv } from "hono";
import type { RuleConfig } from "../config/rule-schema";
import { connectionAddress } from "./connection-address";

/**
 * The headers "ip" rules read. Outside Cloudflare (an address from `ipOf` or the runtime's
 * connection), that address stands in for CF-Connecting-IP, which a client there could forge;
 * on Cloudflare (none found, the header set by the edge) the request's own headers.
 */
export function ipHeaders<E extends HonoEnv>(
  c: Context<E>,
  applying: readonly RuleConfig[],
  ipOf: ((c: Context<E>) => string | undefined) | undefined,
  warn: (rule: string) => void,
): Headers {
  const raw = c.req.raw.headers;
  const ipRule = applying.find((rule) => rule.key === "ip");
  if (!ipRule) return raw;
  const address = ipOf ? ipOf(c) : connectionAddress(c);
  if (address === undefined) {
    if (!raw.has("cf-connecting-ip")) warn(ipRule.name);
    return raw;
  }
  const headers = new Headers(raw);
  headers.set("cf-connecting-ip", address);
  return headers;
}
