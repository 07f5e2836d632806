/**
 * Unique log members: a random per-isolate prefix plus a counter. Created lazily because workerd
 * forbids random values at module scope; short, because every member costs Redis memory.
 */
let isolateId: string | undefined;
let counter = 0;

export function nextMemberId(): string {
  if (isolateId === undefined) {
    const bytes = crypto.getRandomValues(new Uint8Array(9));
    isolateId = btoa(String.fromCharCode(...bytes)).replace(/[+/=]/g, (c) =>
      c === "+" ? "-" : c === "/" ? "_" : "",
    );
  }
  counter = (counter + 1) % Number.MAX_SAFE_INTEGER;
  return `${isolateId}${counter.toString(36)}`;
}
