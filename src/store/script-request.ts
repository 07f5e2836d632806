/**
 * A decision's script call as one REST request: the request @upstash/redis 1.39 sends for
 * `evalsha`/`eval` with the options of createStoreClient's scripts-only client (one attempt, no
 * telemetry, no base64, no sync token, the result as Redis returns it), made without the
 * client's machinery around it: a Command object per call, its arguments mapped, its headers
 * merged, two async layers. Same body, same headers, same errors (UpstashError with the store's
 * words and the command, UpstashJSONParseError for a reply that is not JSON); the decision's
 * signal aborts it.
 */
import { errors } from "@upstash/redis/cloudflare";

/** One script call: EVALSHA by SHA, or EVAL by text. */
export type ScriptRequest = <T>(
  command: "evalsha" | "eval",
  shaOrScript: string,
  keys: string[],
  args: unknown[] | undefined,
  signal: AbortSignal,
) => Promise<T>;

/** Script calls to the REST endpoint at `url`, authorized by `token`. */
export function scriptRequester(url: string, token: string): ScriptRequest {
  // As the client: the URL without a trailing slash, and these two headers in this order.
  const endpoint = url.replace(/\/$/, "");
  const headers = { "Content-Type": "application/json", authorization: `Bearer ${token}` };
  return <T>(
    command: "evalsha" | "eval",
    shaOrScript: string,
    keys: string[],
    args: unknown[] | undefined,
    signal: AbortSignal,
  ): Promise<T> => {
    const body: unknown[] = [command, shaOrScript, keys.length, ...keys];
    if (args) for (const arg of args) body.push(serialized(arg));
    return fetch(endpoint, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      // (The client also passes `keepalive: true`, which workerd's fetch does not take.)
      signal,
    }).then((res) => res.text().then((text) => resultOf<T>(res.ok, text, body)));
  };
}

/** The client's argument serializer: strings, numbers and booleans as they are, else JSON. */
function serialized(arg: unknown): unknown {
  switch (typeof arg) {
    case "string":
    case "number":
    case "boolean":
      return arg;
    default:
      return JSON.stringify(arg);
  }
}

/** The reply as the client reads it: an error status, a reply that is not JSON, an error. */
function resultOf<T>(ok: boolean, text: string, command: unknown[]): T {
  let reply: { result?: unknown; error?: string };
  try {
    reply = JSON.parse(text);
  } catch (error) {
    throw new errors.UpstashJSONParseError(text, { cause: error });
  }
  if (!ok) throw new errors.UpstashError(`${reply.error}, command was: ${JSON.stringify(command)}`);
  const { result, error } = reply;
  if (error) throw new errors.UpstashError(error);
  if (result === undefined) throw new TypeError("Request did not return a result");
  return result as T;
}
