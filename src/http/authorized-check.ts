/**
 * Everything before a /check decision, shared by /check and its routes (peek, reset): the
 * bearer token of the route's scope, the worker's config, the content type, the size cap and
 * strict validation of the body. Nothing is counted unless this returns ok.
 */
import { mayHoldLoneSurrogate } from "../config/validation";
import type { Env } from "../env";
import { headerRuleKey } from "../rules/client-key";
import { getRuntime, type ReadyRuntime } from "../runtime";
import { type CheckRequest, parseCheckBody } from "./check-request";
import { misconfiguredForOperator, problemResponse } from "./problem";
import { type TokenScope, tokenRefusal } from "./token-scope";

/** A check body is a few fields; anything bigger is refused before it is read. */
export const MAX_CHECK_BODY_BYTES = 8 * 1024;

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
  const check = parseCheckBody(
    json,
    runtime.rulesByName,
    runtime.config.clientIp,
    !mayHoldLoneSurrogate(body),
  );
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
  return { ok: true, runtime, check: await keyHeaderRules(check.value) };
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
    return refuse(misconfiguredForOperator(undefined, runtime));
  }

  const contentType = request.headers.get("Content-Type") ?? "";
  if (!/^application\/json\s*(;|$)/i.test(contentType)) {
    return refuse(
      problemResponse(415, {
        title: "Unsupported Media Type",
        detail: "send Content-Type: application/json",
      }),
    );
  }
  // A declared length within the cap is enforced by the runtime (a body longer than its
  // Content-Length is an error): read it in one native call, the common case, here rather than
  // through readBody's own promise. Before touching `request.body`, which builds a
  // stream object in workerd that this path never needs.
  const length = request.headers.get("Content-Length");
  const declared = Number(length ?? "0");
  const body =
    length !== null && Number.isSafeInteger(declared) && declared <= MAX_CHECK_BODY_BYTES
      ? await request.text()
      : await readBody(request, declared);
  if (body === "too-large") {
    return refuse(
      problemResponse(413, {
        title: "Payload Too Large",
        detail: `a check body is at most ${MAX_CHECK_BODY_BYTES} bytes`,
      }),
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return refuse(
      problemResponse(400, {
        title: "Bad Request",
        detail: "body is not valid JSON",
        field: "body",
      }),
    );
  }
  return { ok: true, runtime, json, body };
}

/**
 * A header rule's key given raw (the customer's API key, as the client sends it) keyed as the
 * proxy keys that header: hashed. So /check, peek and reset reach the proxy's log for it.
 */
async function keyHeaderRules(check: CheckRequest): Promise<CheckRequest> {
  if (!check.headerKeyed) return check;
  const requests = [...check.requests];
  for (const i of check.headerKeyed) {
    const request = requests[i];
    if (request) requests[i] = { ...request, key: await headerRuleKey(request.key) };
  }
  return { ...check, requests };
}

/**
 * Reads at most MAX_CHECK_BODY_BYTES, so a huge body is never buffered: a body declared too
 * large, or one without a usable Content-Length (`declared` is its value, 0 when absent).
 */
async function readBody(incoming: Request, declared: number): Promise<string | "too-large"> {
  if (declared > MAX_CHECK_BODY_BYTES) return "too-large";
  if (!incoming.body) return "";
  const reader = incoming.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_CHECK_BODY_BYTES) {
      await reader.cancel();
      return "too-large";
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}
