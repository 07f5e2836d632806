/**
 * What a response says its request used, by a usage rule's spec (docs/usage.md): the simple
 * reader the middleware settles with. A header (or a trailer, once the body has been read) holding
 * an integer, or fields of a JSON body summed, read from a clone, so the client's body is left
 * whole. An event stream is not read here: undefined (the reservation stands). The one call site
 * is `readUsage`, so a streaming reader can take its place.
 */
import type { UsageSpec } from "../config/usage-schema";
import { isUsage } from "../limiter/settle-receipt";

const INTEGER = /^\s*(\d{1,13})\s*$/;
/** A JSON body larger than this (by its Content-Length) is not read: the reservation stands. */
const MAX_USAGE_BODY_BYTES = 1_048_576;

/** The units `response` reports by `spec`, or undefined when it reports none (nothing settled). */
export async function readUsage(response: Response, spec: UsageSpec): Promise<number | undefined> {
  if ("header" in spec) return units(response.headers.get(spec.header));
  const type = response.headers.get("Content-Type") ?? "";
  if (!/\bjson\b/i.test(type) || response.body === null || response.bodyUsed) return undefined;
  // Read from a clone, which holds the body until both are read: bounded, when it says its size.
  const length = Number(response.headers.get("Content-Length") ?? 0);
  if (length > MAX_USAGE_BODY_BYTES) return undefined;
  let body: unknown;
  try {
    body = await response.clone().json();
  } catch {
    return undefined;
  }
  return sumOf(
    body,
    spec.json.map((path) => path.split(".")),
  );
}

/** A header's integer, within what a settle takes. */
function units(value: string | null): number | undefined {
  const match = value === null ? null : INTEGER.exec(value);
  const number = match ? Number(match[1]) : undefined;
  return isUsage(number) ? number : undefined;
}

/**
 * The paths' integers summed (OpenAI's `usage.total_tokens`; Anthropic's input and output
 * tokens): undefined when none is there, or one that is there is not a usage.
 */
function sumOf(body: unknown, paths: readonly (readonly string[])[]): number | undefined {
  let sum = 0;
  let found = false;
  for (const path of paths) {
    let value: unknown = body;
    for (const segment of path) {
      value =
        typeof value === "object" && value !== null && Object.hasOwn(value, segment)
          ? (value as Record<string, unknown>)[segment]
          : undefined;
    }
    if (value === undefined) continue;
    if (!isUsage(value)) return undefined;
    sum += value;
    found = true;
  }
  return found && isUsage(sum) ? sum : undefined;
}
