/**
 * The usage reader (src/http/usage-reader.ts, sse-usage.ts, json-usage.ts, usage-paths.ts)
 * against hostile or broken answers: values at and past the bounds, odd JSON, event streams
 * framed every legal way, bodies already read, encoded bodies and bodies past the cap.
 */
import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_JSON_BYTES } from "../../../src/http/json-usage";
import { SseUsageScanner } from "../../../src/http/sse-usage";
import { compilePaths } from "../../../src/http/usage-paths";
import { readUsage, type UsageSpec } from "../../../src/http/usage-reader";

const bytes = (text: string) => new TextEncoder().encode(text);
const json = { "Content-Type": "application/json" };
const sse = { "Content-Type": "text/event-stream" };

/** The usage `spec` reads from `body` served as `headers` say, its body read to the end. */
async function usageOf(body: BodyInit | null, headers: HeadersInit, spec: UsageSpec) {
  const reading = readUsage(new Response(body, { headers }), spec);
  await reading.response.arrayBuffer();
  return reading.usage;
}

describe("usage values at and past the bounds", () => {
  it("takes JSON integers however spelt, up to 10¹²; strings, fractions and more are none", async () => {
    const read = (value: string) => usageOf(`{"u":${value}}`, json, { json: "u" });
    expect(await read("1e3")).toBe(1_000);
    expect(await read("1E+3")).toBe(1_000);
    expect(await read("1000.0")).toBe(1_000);
    expect(await read("1e12")).toBe(1e12);
    expect(await read("-0")).toBe(0);
    expect(await read("1000000000001")).toBeUndefined();
    expect(await read(String(2 ** 53))).toBeUndefined();
    expect(await read("9007199254740993")).toBeUndefined();
    expect(await read('"12"')).toBeUndefined();
    expect(await read("1.5")).toBeUndefined();
    expect(await read("-1")).toBeUndefined();
    expect(await read("1e400")).toBeUndefined();
    // Duplicated keys: JSON.parse keeps the last, so the charge is what a client of the body reads.
    expect(await usageOf('{"u":5,"u":7}', json, { json: "u" })).toBe(7);
    expect(await usageOf('{"u":5,"u":null}', json, { json: "u" })).toBeUndefined();
    // Own keys only: "__proto__" is a key like any other, "constructor" never inherited.
    expect(await usageOf('{"__proto__":{"u":3}}', json, { json: "__proto__.u" })).toBe(3);
    expect(await usageOf("{}", json, { json: "constructor.length" })).toBeUndefined();
  });

  it("takes a header of digits up to 10¹², nothing else", async () => {
    const read = (value: string) => usageOf("", { "x-usage": value }, { header: "x-usage" });
    expect(await read(" 0012 ")).toBe(12);
    expect(await read("1000000000000")).toBe(1e12);
    for (const bad of ["1000000000001", "1e3", "+5", "0x10", "5, 7", "-0", "١٢"]) {
      expect(await read(bad), bad).toBeUndefined();
    }
  });

  it("counts paths summed past 10¹² as 10¹², which a settle takes", async () => {
    // Each path valid, their sum past what a settle accepts: before, the sum was handed to the
    // settle, refused there, and only the reservation stood.
    const body = '{"a":1000000000000,"b":1000000000000}';
    expect(await usageOf(body, json, { json: ["a", "b"] })).toBe(1e12);
    const events = `data: {"a":999999999999}\n\ndata: {"b":2}\n\n`;
    expect(await usageOf(events, sse, { json: ["a", "b"] })).toBe(1e12);
  });
});

describe("event streams framed every legal way", () => {
  it("reads usage behind a BOM, comments, CRLF, CR, data: without a space and multi-line data", async () => {
    const stream = [
      "\uFEFF: keep-alive\r\n",
      'event: delta\r\ndata:{"x":1}\r\n\r\n',
      'data: {"usage":\r',
      'data:  {"total_tokens": 41}}\r\r',
      ": a comment holding total_tokens\n",
      "id: 9\nretry: 10\n\n",
    ].join("");
    const encoded = bytes(stream);
    // Split at every byte boundary into two chunks: the same usage each time.
    for (let cut = 0; cut <= encoded.length; cut++) {
      const scan = new SseUsageScanner(compilePaths("usage.total_tokens"));
      scan.push(encoded.subarray(0, cut));
      scan.push(encoded.subarray(cut));
      expect(scan.finish(true), `cut at ${cut}`).toBe(41);
    }
  });

  it("reads an event whose data is exactly the cap, and skips one a character past it", () => {
    const event = (pad: string) => `{"u":5,"p":"${pad}"}`;
    const cap = event("xxxxxx").length;
    const exact = new SseUsageScanner(compilePaths("u"), cap);
    exact.push(bytes(`data: ${event("xxxxxx")}\n\n`));
    expect(exact.finish(true)).toBe(5);
    const over = new SseUsageScanner(compilePaths("u"), cap);
    over.push(bytes(`data: ${event("xxxxxxx")}\n\n`));
    expect(over.finish(true)).toBeUndefined();
    // Two lines joined by their LF: the LF counts.
    const lines = new SseUsageScanner(compilePaths("u"), cap);
    lines.push(bytes(`data: {"u":5,\ndata: "p":"xxxxx"}\n\n`));
    expect(lines.finish(true)).toBe(5);
  });
});

describe("an origin that sends an event a few bytes at a time", () => {
  it("copies what it keeps between chunks once, not once per chunk", () => {
    // A 60 000-character event, one byte a chunk, then 2 000 short data lines the same way.
    const event = `data: {"usage":{"t":5},"p":"${"x".repeat(60_000)}"}\n\n`;
    const lines = Array.from({ length: 2_000 }, () => `data: ${"y".repeat(20)}\n`).join("");
    const stream = bytes(`${event}${lines}\ndata: {"usage":{"t":6}}\n\n`);
    // What the scanner copies (to free the chunks it kept slices of) goes through encode:
    // counted, not recorded (a spy would keep every copy).
    const { encode } = TextEncoder.prototype;
    let copiedChars = 0;
    TextEncoder.prototype.encode = function (this: TextEncoder, text?: string) {
      copiedChars += text?.length ?? 0;
      return encode.call(this, text);
    };
    try {
      const scan = new SseUsageScanner(compilePaths("usage.t"));
      for (let i = 0; i < stream.length; i++) scan.push(stream.subarray(i, i + 1));
      expect(scan.finish(true)).toBe(6);
    } finally {
      TextEncoder.prototype.encode = encode;
    }
    // Before, each chunk copied all the event held so far: ~3·10⁹ characters here.
    expect(copiedChars).toBeLessThan(2 * stream.length);
  });
});

describe("bodies the reader cannot read", () => {
  it("hands on a body already read, or locked by a reader, as it is, with no usage", async () => {
    const consumed = new Response('{"u":3}', { headers: json });
    await consumed.text();
    const read = readUsage(consumed, { json: "u" });
    expect(read.response).toBe(consumed);
    expect(await read.usage).toBeUndefined();

    const locked = new Response('data: {"u":3}\n\n', { headers: sse });
    locked.body?.getReader();
    const held = readUsage(locked, { json: "u" });
    expect(held.response).toBe(locked);
    expect(await held.usage).toBeUndefined();
  });

  it("has no usage, at once, for a 204, a 304 or a HEAD answer (no body)", async () => {
    for (const status of [204, 304]) {
      const read = readUsage(new Response(null, { status, headers: json }), { json: "u" });
      expect(read.response.status).toBe(status);
      expect(await read.usage).toBeUndefined();
    }
  });

  it("reads a JSON body whose Content-Length understates it only up to the cap", async () => {
    const body = `{"u":9,"pad":"${"x".repeat(DEFAULT_MAX_JSON_BYTES)}"}`;
    const headers = { ...json, "Content-Length": "10" };
    expect(await usageOf(body, headers, { json: "u" })).toBeUndefined();
  });

  // BUG (medium, a client can steer it): a JSON body past 1 MiB is passed on unread, wherever
  // its usage sits. A client that asks for a big answer (a data API's many rows, an LLM's `n`
  // choices of long completions) gets it charged at the reservation, whatever it used: with a
  // small reservation (the median), an under-charge of everything past it. Documented as a
  // cap (docs/usage.md), but the usage usually comes first or last in a small object; reading
  // the paths with a streaming tokenizer would keep memory bounded. Not a small fix: left failing.
  it.fails("reads usage that comes before a huge array in a JSON body past the cap", async () => {
    const rows = Array.from({ length: 40_000 }, (_, i) => ({ id: i, name: `row ${i}` }));
    const body = JSON.stringify({ usage: { rows: 40_000 }, data: rows });
    expect(body.length).toBeGreaterThan(DEFAULT_MAX_JSON_BYTES);
    expect(await usageOf(body, json, { json: "usage.rows" })).toBe(40_000);
  });

  // BUG (low-medium, the middleware): a body the app encoded (Hono's compress() registered
  // after the rate limiter, a handler returning a gzipped cache entry) is scanned as its
  // compressed bytes: no usage is read and the reservation stands, silently. (workerd's fetch
  // decodes an origin's gzip for the proxy, as Cloudflare documents; the tests' origin sends
  // none, so that side is not tested here.) A fix decodes a copy through
  // DecompressionStream beside the pass-through, with the caps applied to the decoded bytes:
  // not small, left failing.
  it.fails("reads usage from a gzip-encoded JSON body", async () => {
    const body = new Blob(['{"u":7}']).stream().pipeThrough(new CompressionStream("gzip"));
    expect(await usageOf(body, { ...json, "Content-Encoding": "gzip" }, { json: "u" })).toBe(7);
  });
});

describe("a client that leaves just before the usage", () => {
  // BUG (medium where the reservation is below what responses use; documented as "the client
  // drops mid-stream ... the reservation stands"): the reading stops with the client, so a
  // client that takes every chunk but the last (a JSON body's closing `"usage":{…}}`, a
  // stream's usage event) and then drops is charged the reservation, whatever it used: a
  // hostile client's way to a median price for every long answer. The origin had sent (or was
  // sending) the usage; reading on after the client goes (the rest of a JSON body up to its
  // cap, a stream for a bounded time) would charge it. A design change, not local: left failing.
  it.fails("charges the usage of a JSON body whose client left before its last chunk", async () => {
    let origin!: ReadableStreamDefaultController<Uint8Array>;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        origin = controller;
      },
    });
    const { response, usage } = readUsage(new Response(body, { headers: json }), { json: "u" });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    origin.enqueue(bytes(`{"answer":"${"every token the client wanted ".repeat(100)}",`));
    await reader.read();
    // The origin sends the rest; the client, having what it wanted, leaves without reading it.
    origin.enqueue(bytes('"u":4000}'));
    origin.close();
    await reader.cancel("client gone");
    expect(await usage).toBe(4_000);
  });
});
