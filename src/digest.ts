// Hashing with WebCrypto, shared by the store (script SHAs), client keys and the bearer check.
// crypto.subtle is async and, in workerd, only usable inside a request: callers cache results.

export type DigestAlgorithm = "SHA-1" | "SHA-256";

/** The digest of `text`'s UTF-8 bytes. */
export async function digest(algorithm: DigestAlgorithm, text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest(algorithm, new TextEncoder().encode(text)));
}

/** The digest of `text`'s UTF-8 bytes, as lower-case hex. */
export async function digestHex(algorithm: DigestAlgorithm, text: string): Promise<string> {
  let hex = "";
  for (const byte of await digest(algorithm, text)) hex += byte.toString(16).padStart(2, "0");
  return hex;
}
