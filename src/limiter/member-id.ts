/**
 * Member ids. Created lazily because workerd forbids random values at module scope.
 *
 * A log member (`<memberId>.<n>`) only has to be unique: a random per-isolate prefix plus a
 * counter, short, because every member costs Redis memory for a whole window. Nothing takes one
 * from a caller as proof of anything: a refund names its member through a receipt the limiter
 * handed out, which also names every policy and key it gives back from.
 *
 * A concurrency slot's id is different: `POST /check/release` frees whichever slot a caller
 * names, so the id is the holder's only proof. A prefix and a counter let one holder name its
 * neighbours' slots (and free them while they still run): a slot id is 128 random bits instead.
 */
let isolateId: string | undefined;
let counter = 0;

/** Base64url without padding: what keys and JSON carry unescaped. */
function base64url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes)).replace(/[+/=]/g, (c) =>
    c === "+" ? "-" : c === "/" ? "_" : "",
  );
}

/** A log member id: unique per evaluation, not secret. */
export function nextMemberId(): string {
  isolateId ??= base64url(crypto.getRandomValues(new Uint8Array(9)));
  counter = (counter + 1) % Number.MAX_SAFE_INTEGER;
  return `${isolateId}${counter.toString(36)}`;
}

/** Random bytes in a slot id: 128 bits, 22 characters. */
const SLOT_ID_BYTES = 16;

/** A concurrency slot's id: unguessable, for a release naming it is all a holder proves. */
export function newSlotId(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(SLOT_ID_BYTES)));
}

/**
 * The slot id of a replay whose record names no member (written before records kept it): the
 * request id's, as slots were named then. Such records expire within their window.
 */
export function legacySlotId(requestId: string): string {
  return `r:${requestId}`;
}
