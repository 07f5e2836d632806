/** The headers a middleware request's client address is read from ("ip" rules, network blocks). */
import type { Context, Env as HonoEnv } from "hono";
import type { RuleConfig } from "../config/rule-schema";
import { connectionAddress } from "./connection-address";

/**
 * The request's headers as its client's own address reads them. Outside Cloudflare (an address
 * from `ipOf` or the runtime's connection), that address stands in for CF-Connecting-IP, which a
 * client there could forge; on Cloudflare (none found, the header set by the edge) the request's
 * own headers.
 */
export function ownAddressHeaders<E extends HonoEnv>(
  c: Context<E>,
  ipOf: ((c: Context<E>) => string | undefined) | undefined,
): Headers {
  const raw = c.req.raw.headers;
  const address = ipOf ? ipOf(c) : connectionAddress(c);
  if (address === undefined) return raw;
  const headers = new Headers(raw);
  headers.set("cf-connecting-ip", address);
  return headers;
}

/**
 * The headers "ip" rules read: the own address's when one applies (`warn` when there is none at
 * all), else the request's own. `own`: ownAddressHeaders, when the caller has it already.
 */
export function ipHeaders<E extends HonoEnv>(
  c: Context<E>,
  applying: readonly RuleConfig[],
  ipOf: ((c: Context<E>) => string | undefined) | undefined,
  warn: (rule: string) => void,
  own?: Headers,
): Headers {
  const ipRule = applying.find((rule) => rule.key === "ip");
  if (!ipRule) return c.req.raw.headers;
  const headers = own ?? ownAddressHeaders(c, ipOf);
  if (!headers.has("cf-connecting-ip")) warn(ipRule.name);
  return headers;
}
