// Hashing with WebCrypto, shared by the store (script SHAs), client keys and the bearer check.
// crypto.subtle is async and, in workerd, only usable inside a request: callers cache results.

export type DigestAlgorithm = "SHA-1" | "SHA-256";

/** The digest of `text`'s UTF-8 bytes (or of `data` as given). */
async function digest(
  algorithm: DigestAlgorithm,
  text: string | Uint8Array<ArrayBuffer>,
): Promise<Uint8Array> {
  const data = typeof text === "string" ? new TextEncoder().encode(text) : text;
  return new Uint8Array(await crypto.subtle.digest(algorithm, data));
}

/** The digest of `text`'s UTF-8 bytes (or of `data` as given), as lower-case hex. */
export async function digestHex(
  algorithm: DigestAlgorithm,
  text: string | Uint8Array<ArrayBuffer>,
): Promise<string> {
  // Joined, not concatenated: `+=` builds a tree of 2-character strings (a kB on the heap for
  // 64 characters) that a cache holding the digest would keep as it is.
  return Array.from(await digest(algorithm, text), (byte) =>
    byte.toString(16).padStart(2, "0"),
  ).join("");
}
