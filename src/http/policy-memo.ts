/**
 * A per-isolate memo of what an ad-hoc /check body's policy fields validate to. A service sends
 * the same few policies on every request (`{ limit: 100, window: "1m" }` with a new key each
 * time); reading them runs five schemas, a duration parse and the bounds check, ~3 % of
 * workerd's CPU per decision. Validation is a pure function of those values, so
 * answering from a memo keyed by them is exact: a refusal names the same field with the same
 * reason, a policy is the same policy.
 */

import { ownedString } from "../owned-string";

/**
 * Distinct policies remembered per isolate. Past it the memo starts over (a body that varies its
 * limit per request only pays the full read again, never more memory).
 * @default 256
 */
const MAX_MEMO_POLICIES = 256;

/**
 * Longest memo key (UTF-16 units): a body whose policy values spell more is read afresh and not
 * remembered. Real policy values spell a few dozen characters (`n100|s2:1m`); a body may be
 * larger (the /check size cap), and 256 such memo keys would hold megabytes. So the memo holds
 * at most MAX_MEMO_POLICIES × (2 × 256 bytes + the read result of so short values): ~200 kB.
 */
const MAX_MEMO_KEY_LENGTH = 256;

/**
 * Memoizes `read` by the values of `fields`. Only primitives (JSON's strings, numbers,
 * booleans, and absent fields) make a key; a body with an object or array there, or -0 (which
 * prints as 0), is read afresh every time. A string is spelled with its length, so no two
 * different bodies share a key.
 */
export function createPolicyMemo<T>(
  /** Every body field `read` reads: the memo is exact only if none is missing. */
  fields: readonly string[],
  read: (body: Record<string, unknown>) => T,
  maxEntries = MAX_MEMO_POLICIES,
): (body: Record<string, unknown>) => T {
  const memo = new Map<string, T>();
  return function memoizedPolicy(body) {
    let key = "";
    for (const field of fields) {
      const value = body[field];
      switch (typeof value) {
        case "undefined":
          key += "u";
          break;
        case "number":
          if (Object.is(value, -0)) return read(body);
          key += `n${value}|`;
          break;
        case "string":
          if (value.length > MAX_MEMO_KEY_LENGTH) return read(body);
          key += `s${value.length}:${value}`;
          break;
        case "boolean":
          key += value ? "t" : "f";
          break;
        default:
          return read(body);
      }
    }
    const known = memo.get(key);
    if (known !== undefined) return known;
    const result = read(body);
    if (key.length > MAX_MEMO_KEY_LENGTH) return result;
    if (memo.size >= maxEntries) memo.clear();
    // A copy: the key is a concatenation pointing at the body's strings.
    memo.set(ownedString(key), result);
    return result;
  };
}
