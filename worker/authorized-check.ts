/**
 * Everything before a /check decision, shared by /check and its routes (peek, reset): the
 * bearer token of the route's scope, the worker's config, the content type, the size cap and
 * strict validation of the body. Nothing is counted unless this returns ok.
 */

import type { CheckRequest } from "edge-limiter/server";
import { problemResponse, readJsonBody } from "edge-limiter/server";
import type { Env } from "./env";
import { misconfigured } from "./problems";
import { getRuntime, type ReadyRuntime } from "./runtime";
import { type TokenScope, tokenRefusal } from "./token-scope";

/** A check body is a few fields; anything bigger is refused before it is read. */
const MAX_CHECK_BODY_BYTES = 8 * 1024;

/** A /check request authorized and its body valid, or the answer that refuses it. */
export type AuthorizedCheck =
  | { ok: true; runtime: ReadyRuntime; check: CheckRequest }
  | { ok: false; response: Response };

/**
 * The check a /check body asks for, once the caller is authorized and the body valid; otherwise
 * the answer that refuses it (401, 403, 415, 413, 400, or 503 for a misconfigured worker).
 * /check, peek and reset alike, from the request and bindings workerd hands the worker; `scope`
 * says which token the route takes (token-scope.ts: reset is an admin route).
 */
export async function authorizeCheck(
  request: Request,
  env: Env,
  scope: TokenScope,
): Promise<AuthorizedCheck> {
  const read = await authorizedJson(request, env, scope);
  if (!read.ok) return read;
  const { runtime, json, body } = read;
  const check = await runtime.rules.parseCheck(json, body);
  if (!check.ok) {
    return {
      ok: false,
      response: problemResponse(400, {
        title: "Bad Request",
        detail: `${check.field} ${check.detail}`,
        field: check.field,
      }),
    };
  }
  return { ok: true, runtime, check: check.value };
}

/**
 * The token checked against `scope`, the runtime built and the JSON body read (at most
 * MAX_CHECK_BODY_BYTES), or the answer refusing the call (401, 403, 415, 413, 400, 503): what
 * every POST under /check shares.
 */
export async function authorizedJson(
  request: Request,
  env: Env,
  scope: TokenScope,
  fields?: readonly string[],
): Promise<
  | { ok: true; runtime: ReadyRuntime; json: unknown; body: string }
  | { ok: false; response: Response }
> {
  const refuse = (response: Response) => ({ ok: false as const, response });
  const refusal = tokenRefusal(request.headers.get("Authorization") ?? undefined, env, scope);
  if (refusal) {
    return refuse(
      problemResponse(
        refusal.status,
        { title: refusal.status === 401 ? "Unauthorized" : "Forbidden", detail: refusal.detail },
        // RFC 6750: a token without the right is insufficient_scope.
        {
          "WWW-Authenticate":
            refusal.status === 403 ? 'Bearer error="insufficient_scope"' : "Bearer",
        },
      ),
    );
  }

  const runtime = getRuntime(env);
  if (!runtime.ok) {
    // Only past the token: the reason may quote a secret (the public gets the generic 503).
    return refuse(misconfigured(runtime, "operator"));
  }

  const read = await readJsonBody(request, {
    maxBytes: MAX_CHECK_BODY_BYTES,
    ...(fields ? { fields } : {}),
  });
  if (!read.ok) return read;
  return { ok: true, runtime, json: read.json, body: read.text };
}
