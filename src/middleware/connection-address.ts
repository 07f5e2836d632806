/**
 * The client's address from the runtime's own connection info, for "ip" rules outside
 * Cloudflare (where no CF-Connecting-IP is set, and any client may send one). What Hono's
 * `getConnInfo` reads on each runtime, without importing any of them (the package runs on all):
 * - Bun (`Bun.serve({ fetch: app.fetch })`): the server is `c.env`, `requestIP(request)`;
 * - Deno (`Deno.serve(app.fetch)`): the handler info is `c.env`, `remoteAddr.hostname`;
 * - Node (`@hono/node-server`): `c.env.incoming`, the IncomingMessage, `socket.remoteAddress`.
 * Undefined on Cloudflare (`c.env` is the bindings) and anywhere else.
 */
import type { Context } from "hono";

interface RuntimeEnv {
  requestIP?: (request: Request) => { address?: unknown } | null;
  remoteAddr?: { hostname?: unknown };
  incoming?: { socket?: { remoteAddress?: unknown } };
}

export function connectionAddress(c: Context): string | undefined {
  const env = c.env as RuntimeEnv | undefined;
  if (!env || typeof env !== "object") return undefined;
  try {
    const bun = typeof env.requestIP === "function" ? env.requestIP(c.req.raw)?.address : undefined;
    if (typeof bun === "string") return bun;
  } catch {
    // Not Bun's server after all.
  }
  const deno = env.remoteAddr?.hostname;
  if (typeof deno === "string") return deno;
  const node = env.incoming?.socket?.remoteAddress;
  if (typeof node === "string") return node;
  return undefined;
}
