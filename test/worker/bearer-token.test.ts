import { describe, expect, it } from "vitest";
import { bearerTokenMatches, type CodeUnits, constantTimeEquals } from "../../worker/bearer-token";

const TOKEN = "s3cret-tøken-42";

/** The token's code units, as bearer-token.ts keeps the configured one. */
const units = (text: string) => Uint16Array.from(text, (_, i) => text.charCodeAt(i));

/** A presented token that counts which of its code units were read. */
function counted(text: string): CodeUnits & { reads: number[] } {
  const reads: number[] = [];
  return {
    reads,
    length: text.length,
    charCodeAt(index: number) {
      reads.push(index);
      return text.charCodeAt(index);
    },
  };
}

describe("bearerTokenMatches", () => {
  it("accepts the configured token with the scheme in any case", () => {
    for (const scheme of ["Bearer", "bearer", "BEARER", "bEaReR"]) {
      expect(bearerTokenMatches(`${scheme} ${TOKEN}`, TOKEN), scheme).toBe(true);
    }
  });

  it("refuses everything else, whatever its length", () => {
    const refused = [
      undefined,
      "",
      "Bearer",
      "Bearer ",
      `Bearer  ${TOKEN}`, // two spaces: the token would start with one
      `Basic ${TOKEN}`,
      `Bearer\t${TOKEN}`, // the scheme's space is a space (a tab, or a NUL, which case folding
      `Bearer\u0000${TOKEN}`, // would turn into one, is not)
      `Bearex ${TOKEN}`,
      `Bearer${TOKEN}`,
      TOKEN,
      `Bearer ${TOKEN.slice(0, -1)}`, // a prefix
      `Bearer ${TOKEN}x`, // longer
      `Bearer ${TOKEN.toUpperCase()}`,
      `Bearer ${TOKEN.replace("ø", "o")}`, // one code unit differs
      `Bearer ${TOKEN}${TOKEN}`, // wraps onto the secret twice
      `Bearer ${"x".repeat(10_000)}`,
    ];
    for (const header of refused) expect(bearerTokenMatches(header, TOKEN), header).toBe(false);
  });

  it("follows a changed LIMITER_TOKEN (the per-isolate copy is replaced)", () => {
    expect(bearerTokenMatches(`Bearer ${TOKEN}`, TOKEN)).toBe(true);
    expect(bearerTokenMatches(`Bearer ${TOKEN}`, "another-token")).toBe(false);
    expect(bearerTokenMatches("Bearer another-token", "another-token")).toBe(true);
  });

  it("keeps LIMITER_TOKEN and LIMITER_ADMIN_TOKEN apart when a route compares both, then a third", () => {
    const admin = "admin-tøken";
    for (let i = 0; i < 3; i++) {
      expect(bearerTokenMatches(`Bearer ${TOKEN}`, TOKEN)).toBe(true);
      expect(bearerTokenMatches(`Bearer ${TOKEN}`, admin)).toBe(false);
      expect(bearerTokenMatches(`Bearer ${admin}`, admin)).toBe(true);
      expect(bearerTokenMatches(`Bearer ${admin}`, TOKEN)).toBe(false);
    }
    // A changed token replaces the older entry; both others still compare as themselves.
    expect(bearerTokenMatches("Bearer third", "third")).toBe(true);
    expect(bearerTokenMatches(`Bearer ${admin}`, admin)).toBe(true);
    expect(bearerTokenMatches(`Bearer ${TOKEN}`, TOKEN)).toBe(true);
    expect(bearerTokenMatches("Bearer third", TOKEN)).toBe(false);
  });
});

describe("constantTimeEquals", () => {
  // Constant time, checked by what it does rather than by a clock: it reads every code unit of
  // the presented token exactly once, in order, wherever the first difference is, and reads the
  // same whatever the secret's length. An early exit (or a loop over the secret) fails here.
  it("reads every presented code unit once, wherever the first difference is", () => {
    const secret = units(TOKEN);
    const presentedTokens = [
      TOKEN, // equal
      `X${TOKEN.slice(1)}`, // differs first
      `${TOKEN.slice(0, -1)}X`, // differs last
      "short",
      `${TOKEN}-and-longer-than-the-secret`,
      "",
    ];
    for (const text of presentedTokens) {
      const presented = counted(text);
      expect(constantTimeEquals(presented, secret), text).toBe(text === TOKEN);
      expect(presented.reads, text).toEqual(Array.from({ length: text.length }, (_, i) => i));
    }
  });

  it("reads the same of a presented token whatever secret it is compared with", () => {
    const text = "presented-token";
    const readsWith = (secret: string) => {
      const presented = counted(text);
      constantTimeEquals(presented, units(secret));
      return presented.reads;
    };
    const expected = readsWith(text);
    for (const secret of ["p", "presented-tokeX", "a-much-longer-secret-than-the-token", ""]) {
      expect(readsWith(secret), secret).toEqual(expected);
    }
  });
});
