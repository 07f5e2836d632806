/** The /check bearer tokens, compared in constant time, synchronously. */

/**
 * Constant-time bearer token check. The configured token's UTF-16 code units are taken once per
 * isolate; each request's token is compared against them unit by unit with no early exit, over
 * the *presented* token's length: how long it takes depends only on what the caller sent, never
 * on where (or whether) it differs from the secret, nor on the secret's length (indices wrap
 * with `%`). No hashing: a SHA-256 of each side cost an async Web Crypto call per request (about
 * a tenth of a /check decision's CPU in workerd) and bought nothing this does not.
 */
export function bearerTokenMatches(header: string | undefined, expected: string): boolean {
  // RFC 9110 §11.1: the scheme is case-insensitive ("bearer x" is valid). One space, as every
  // client sends it (a stricter reading than 1*SP, kept: nothing legitimate sends two).
  if (header === undefined || header.length <= SCHEME.length || !hasBearerScheme(header)) {
    return false;
  }
  return constantTimeEquals(header.slice(SCHEME.length), expectedUnits(expected));
}

const SCHEME = "bearer ";

/**
 * `header` starts with "bearer " in any case (the scheme is public: no need for constant time
 * here). A loop, not a regex: no match array and captured copy per request.
 */
function hasBearerScheme(header: string): boolean {
  for (let i = 0; i < SCHEME.length; i++) {
    const unit = header.charCodeAt(i);
    // ASCII letters fold to lower case with | 0x20; the space (0x20) is unchanged by it, but
    // so would "\0" be: compare the space exactly.
    if ((i === SCHEME.length - 1 ? unit : unit | 0x20) !== SCHEME.charCodeAt(i)) return false;
  }
  return true;
}

/** What constantTimeEquals reads of the presented token (a string; tests count the reads). */
export interface CodeUnits {
  readonly length: number;
  charCodeAt(index: number): number;
}

/**
 * Whether `presented` holds exactly the code units `expected` holds, reading every unit of
 * `presented` once whatever they are: no branch depends on the secret.
 */
export function constantTimeEquals(presented: CodeUnits, expected: Uint16Array): boolean {
  const n = expected.length;
  let diff = presented.length ^ n;
  for (let i = 0; i < presented.length; i++) {
    diff |= presented.charCodeAt(i) ^ (expected[i % n] ?? 0);
  }
  return diff === 0;
}

// The configured tokens are the same on every request of an isolate: their code units are taken
// once. Two entries, LIMITER_TOKEN's and LIMITER_ADMIN_TOKEN's (a route may compare both): with
// one, a /check alternating between them would rebuild it on every request. A third, changed,
// token replaces the older entry. Read-only once built: sharing them across requests shares no
// I/O object.
let newer: { token: string; units: Uint16Array } | undefined;
let older: { token: string; units: Uint16Array } | undefined;

function expectedUnits(token: string): Uint16Array {
  if (newer?.token === token) return newer.units;
  if (older?.token === token) return older.units;
  const units = new Uint16Array(token.length);
  for (let i = 0; i < token.length; i++) units[i] = token.charCodeAt(i);
  older = newer;
  newer = { token, units };
  return units;
}
