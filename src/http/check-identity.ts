import * as v from "valibot";
import { MAX_KEY_LENGTH } from "../bounded-key";
import { clientKeySchema, requestIdSchema } from "../config/schema-parts";
import { invalid, type Validated } from "../config/validation";

const optionalRequestIdSchema = v.optional(requestIdSchema);

/**
 * A /check body's `key` and `requestId`. The common shapes (a key within bounds, no request id)
 * skip the schema run, which costs a few µs a request: exactly what the schemas accept there;
 * any other value goes through them for their refusal, naming the field.
 */
export function readCheckIdentity(
  body: Record<string, unknown>,
): Validated<{ key: string; requestId: string | undefined }> {
  const givenKey = body.key;
  let key: string;
  if (typeof givenKey === "string" && givenKey.length >= 1 && givenKey.length <= MAX_KEY_LENGTH) {
    key = givenKey;
  } else {
    const parsed = v.safeParse(clientKeySchema, givenKey);
    if (!parsed.success) return invalid("key", parsed.issues[0]?.message ?? "is invalid");
    key = parsed.output;
  }
  if (body.requestId === undefined) return { ok: true, value: { key, requestId: undefined } };
  const parsed = v.safeParse(optionalRequestIdSchema, body.requestId);
  if (!parsed.success) return invalid("requestId", parsed.issues[0]?.message ?? "is invalid");
  return { ok: true, value: { key, requestId: parsed.output } };
}
