/**
 * Constant-time bearer token check: both sides are hashed to fixed-length digests first, so
 * neither the comparison's duration nor an early length mismatch tells an attacker anything.
 */
export async function bearerTokenMatches(
  header: string | undefined,
  expected: string,
): Promise<boolean> {
  const presented = header?.startsWith("Bearer ") ? header.slice("Bearer ".length) : "";
  const [a, b] = await Promise.all([digest(presented), digest(expected)]);
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0 && presented.length > 0;
}

async function digest(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
}
