/**
 * The usage a response reports, read as its body passes to the client: never buffered, never
 * delayed. The body is re-served through a pull stream with no queue of its own (each chunk is
 * read from the origin when the client asks for one, handed on, then scanned), so the bytes, their
 * chunking and the time to the first byte are the origin's. Runs wherever Response and streams do
 * (workerd, Node, Bun, Deno): no runtime-specific API.
 */
import { DEFAULT_MAX_JSON_BYTES, JsonUsageCollector } from "./json-usage";
import { DEFAULT_MAX_EVENT_LENGTH, SseUsageScanner } from "./sse-usage";
import { compilePaths, usageValue } from "./usage-paths";

/**
 * Where a response reports what it used.
 *
 * - `{ header }`: a response header (or, where the runtime exposes them, a trailer) holding a
 *   decimal integer.
 * - `{ json }`: one path or several, each dot-separated through the objects of a JSON document
 *   (`"usage.total_tokens"`), read from an `application/json` (or `+json`) body, or from every
 *   `data:` event of a `text/event-stream` whose data is a JSON object. Several paths are summed.
 *   In a stream, for each path the last event that carries a valid value for it wins, and the
 *   paths' values are summed: OpenAI's `"usage.total_tokens"` (in the last chunk, with
 *   `stream_options.include_usage`), or Anthropic's `["message.usage.input_tokens",
 *   "usage.output_tokens"]` (input tokens in `message_start`'s message, output tokens in the last
 *   `message_delta`). A path no document carried counts 0, unless none of the paths was carried:
 *   then there is no usage. A sum past 10¹² counts 10¹².
 *
 * A usage value is a JSON number (or, for a header, a string of digits) whose value is an
 * integer from 0 to 10¹²; a negative, fractional, non-numeric or larger value is ignored, as if
 * the path or header were missing.
 */
export type UsageSpec = { header: string } | { json: string | readonly string[] };

/** Caps on what reading usage may hold per response. */
export type UsageReaderOptions = {
  /** A JSON body larger than this is passed through unread (no usage). Default 1 MiB. */
  maxJsonBytes?: number;
  /** An event whose joined data is longer than this (in characters) is skipped. Default 64 Ki. */
  maxEventLength?: number;
  /**
   * The incoming request's signal: its abort (the client went away) ends the reading as a cancel
   * does. workerd never calls the `cancel` of a body made in JavaScript when its client drops
   * (release-at-end.ts); it aborts this signal (with `enable_request_signal`), or errors the
   * pipe of a body wrapped by `releasingAtEnd`, which cancels this one.
   */
  signal?: AbortSignal | undefined;
};

/** The response to hand to the client, and the usage it reports once its body has ended. */
export type UsageReading = { response: Response; usage: Promise<number | undefined> };

/** What scans the body: fed each chunk, asked for the usage when the body ends or stops. */
type BodyScan = {
  push(chunk: Uint8Array): void;
  finish(complete: boolean): number | undefined;
};

/**
 * Reads the usage `spec` names from `response` while its body passes through. The returned
 * response has the same status, headers and body bytes, chunk for chunk, as they arrive. The
 * usage promise never rejects; it resolves:
 *
 * - with a header that is present: at once (the response is returned as it is);
 * - otherwise when the body ends, with the usage read (undefined when there was none); when the
 *   client cancels the body (its origin's body is then cancelled too) or the origin's body fails,
 *   with the usage of the events already complete (a JSON body cut short has none);
 * - at once with undefined when nothing can be read: no body, a body of another content type, a
 *   JSON body whose Content-Length is past the cap, a body already read or locked (the response
 *   is then returned as it is), a header missing where the runtime exposes no trailers, a signal
 *   already aborted (the origin's body is then cancelled).
 *
 * A body nobody reads never ends: its usage stays pending, as the body does.
 *
 * @example
 * const { response, usage } = readUsage(await fetch(upstream), { json: "usage.total_tokens" });
 * ctx.waitUntil(usage.then((tokens) => settle(tokens)));
 * return response;
 */
export function readUsage(
  response: Response,
  spec: UsageSpec,
  options: UsageReaderOptions = {},
): UsageReading {
  if ("header" in spec) return readHeader(response, spec.header, options.signal);
  const paths = compilePaths(spec.json);
  const type = mediaType(response.headers.get("content-type"));
  const maxJson = options.maxJsonBytes ?? DEFAULT_MAX_JSON_BYTES;
  if (type === "text/event-stream") {
    const scan = new SseUsageScanner(paths, options.maxEventLength ?? DEFAULT_MAX_EVENT_LENGTH);
    return scanned(response, scan, options.signal);
  }
  if (type === "application/json" || type.endsWith("+json")) {
    const declared = Number(response.headers.get("content-length") ?? Number.NaN);
    if (!(declared > maxJson)) {
      return scanned(response, new JsonUsageCollector(paths, maxJson), options.signal);
    }
  }
  return { response, usage: Promise.resolve(undefined) };
}

/** The media type of a Content-Type, lower-cased, without its parameters. */
function mediaType(contentType: string | null): string {
  return (contentType ?? "").split(";", 1)[0]?.trim().toLowerCase() ?? "";
}

/** A header's usage: a string of at most 13 digits (so never past 10¹² + …), as a number. */
function headerUsage(value: string | null | undefined): number | undefined {
  const text = value?.trim();
  if (!text || !/^\d{1,13}$/.test(text)) return undefined;
  return usageValue(Number(text));
}

/** Trailers, where a runtime exposes them as `response.trailers` (a promise of Headers). */
type WithTrailers = { trailers?: unknown };

function readHeader(
  response: Response,
  name: string,
  signal: AbortSignal | undefined,
): UsageReading {
  if (name.trim() === "") throw new TypeError("usage.header: a header name");
  const now = headerUsage(response.headers.get(name));
  if (now !== undefined) return { response, usage: Promise.resolve(now) };
  const trailers = (response as WithTrailers).trailers;
  if (!response.body || typeof (trailers as Promise<unknown>)?.then !== "function") {
    return { response, usage: Promise.resolve(undefined) };
  }
  let complete = false;
  const scan: BodyScan = {
    push() {},
    finish(ended) {
      complete = ended;
      return undefined;
    },
  };
  const reading = scanned(response, scan, signal);
  const usage = reading.usage.then(async () => {
    if (!complete) return undefined;
    try {
      const headers = (await trailers) as Headers | undefined;
      return headerUsage(headers?.get(name));
    } catch {
      return undefined;
    }
  });
  return { response: reading.response, usage };
}

/** A body's chunk as bytes (a Uint8Array in every runtime; any other view read as its bytes). */
function asBytes(chunk: ArrayBufferView): Uint8Array {
  return chunk instanceof Uint8Array
    ? chunk
    : new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

/** The response with its body re-served through `scan`; the usage when the body stops. */
function scanned(
  response: Response,
  scan: BodyScan,
  signal: AbortSignal | undefined,
): UsageReading {
  const body = response.body;
  if (!body) return { response, usage: Promise.resolve(scan.finish(true)) };
  // A body read already (a handler that consumed it, or holds its reader): nothing to read, and
  // the response is handed on as it is, so it fails (or not) as it would without a usage rule.
  if (response.bodyUsed || body.locked) return { response, usage: Promise.resolve(undefined) };
  if (signal?.aborted) {
    body.cancel(signal.reason).catch(() => {});
    return { response, usage: Promise.resolve(scan.finish(false)) };
  }
  let resolve: (usage: number | undefined) => void = () => {};
  const usage = new Promise<number | undefined>((done) => (resolve = done));
  let finished = false;
  const finish = (complete: boolean) => {
    if (finished) return;
    finished = true;
    signal?.removeEventListener("abort", gone);
    let read: number | undefined;
    try {
      read = scan.finish(complete);
    } catch {
      // A scan that fails reads no usage; the body is not its concern.
    }
    resolve(read);
  };
  const reader = body.getReader();
  const gone = () => {
    finish(false);
    reader.cancel(signal?.reason).catch(() => {});
  };
  signal?.addEventListener("abort", gone);
  const passing = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let read: ReadableStreamReadResult<Uint8Array>;
        try {
          read = await reader.read();
        } catch (error) {
          finish(false);
          controller.error(error);
          return;
        }
        if (read.done) {
          finish(true);
          controller.close();
          return;
        }
        const chunk = read.value;
        // Handed on before it is scanned: a scan that fails cannot lose it. The client's read
        // still resumes after the scan (same turn), which costs it the scan's few µs a chunk.
        controller.enqueue(chunk);
        if (!finished) {
          try {
            scan.push(asBytes(chunk));
          } catch {
            finish(false);
          }
        }
      },
      cancel(reason) {
        finish(false);
        return reader.cancel(reason);
      },
    },
    // No queue: a chunk is read from the origin only when the client asks for one.
    { highWaterMark: 0 },
  );
  return { response: new Response(passing, response), usage };
}
