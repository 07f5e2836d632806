/** The /check bearer token, compared in constant time. */
import { digest } from "../digest";

/**
 * Constant-time bearer token check: both sides are hashed to fixed-length digests first, so
 * neither the comparison's duration nor an early length mismatch tells an attacker anything.
 */
export async function bearerTokenMatches(
  header: string | undefined,
  expected: string,
): Promise<boolean> {
  // RFC 9110 §11.1: the scheme is case-insensitive ("bearer x" is valid). One space, as every
  // client sends it (a stricter reading than 1*SP, kept: nothing legitimate sends two).
  const presented = header?.match(BEARER)?.[1] ?? "";
  const [a, b] = await Promise.all([digest("SHA-256", presented), expectedDigest(expected)]);
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0 && presented.length > 0;
}

const BEARER = /^bearer (.+)$/i;

// The configured token is the same on every request of an isolate: hash it once. (One entry:
// a changed LIMITER_TOKEN replaces it.)
let cached: { token: string; digest: Promise<Uint8Array> } | undefined;

function expectedDigest(token: string): Promise<Uint8Array> {
  if (cached?.token !== token) cached = { token, digest: digest("SHA-256", token) };
  return cached.digest;
}
