/**
 * src/http/usage-reader.ts in workerd: the response handed on carries the origin's status,
 * headers and bytes, chunk for chunk, its first chunk before the origin has sent a second; the
 * usage resolves from a header at once, from an event stream when the body ends, and with what
 * was already read when the client cancels or the origin fails. JSON bodies: json-usage.test.ts.
 */
import { describe, expect, it } from "vitest";
import { releasingAtEnd } from "../../../src/http/release-at-end";
import { readUsage } from "../../../src/http/usage-reader";

const bytes = (text: string) => new TextEncoder().encode(text);

/** An origin's body that the test feeds by hand, and records how it was cancelled. */
function handFed() {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const cancelled: unknown[] = [];
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    cancel: (reason) => void cancelled.push(reason),
  });
  return {
    body,
    cancelled,
    send: (text: string | Uint8Array) =>
      controller.enqueue(typeof text === "string" ? bytes(text) : text),
    end: () => controller.close(),
    fail: (error: Error) => controller.error(error),
  };
}

/** A response whose body yields exactly these chunks. */
function responseOf(chunks: (string | Uint8Array)[], init: ResponseInit): Response {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks)
        controller.enqueue(typeof chunk === "string" ? bytes(chunk) : chunk);
      controller.close();
    },
  });
  return new Response(body, init);
}

/** Every chunk the response's body yields, in order. */
async function chunksOf(response: Response): Promise<Uint8Array[]> {
  const chunks: Uint8Array[] = [];
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  for (let read = await reader.read(); !read.done; read = await reader.read())
    chunks.push(read.value);
  return chunks;
}

const sse = { "Content-Type": "text/event-stream; charset=utf-8" };
const json = { "Content-Type": "application/json" };

describe("readUsage: the response handed on", () => {
  it("passes status, headers and every byte through, chunk for chunk, whatever the bytes", async () => {
    const random = crypto.getRandomValues(new Uint8Array(3000));
    const chunks = [
      random.subarray(0, 1),
      random.subarray(1, 1000),
      bytes("\r\n\n"),
      random.subarray(1000),
    ];
    for (const [type, spec] of [
      [sse, { json: "usage.total_tokens" }],
      [json, { json: ["a", "b"] }],
      [{ "Content-Type": "application/octet-stream" }, { json: "a" }],
      [{}, { header: "x-usage" }],
    ] as const) {
      const origin = responseOf(chunks, {
        status: 207,
        statusText: "Multi",
        headers: { ...type, "X-Origin": "kept" },
      });
      const { response, usage } = readUsage(origin, spec);
      expect(response.status).toBe(207);
      expect(response.statusText).toBe("Multi");
      expect(response.headers.get("X-Origin")).toBe("kept");
      expect(await chunksOf(response)).toEqual(chunks);
      expect(await usage).toBeUndefined();
    }
  });

  it("forwards the first chunk while the origin has sent nothing more", async () => {
    const origin = handFed();
    const { response, usage } = readUsage(new Response(origin.body, { headers: sse }), {
      json: "usage.total_tokens",
    });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    origin.send('data: {"choices":[]}\n\n');
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('data: {"choices":[]}\n\n');
    origin.send('data: {"usage":{"total_tokens":31}}\n\n');
    origin.end();
    expect((await reader.read()).done).toBe(false);
    expect((await reader.read()).done).toBe(true);
    expect(await usage).toBe(31);
  });

  it("passes a 10 MB event stream without usage through whole: no usage, every byte", async () => {
    const event = bytes(`data: {"choices":[{"delta":{"content":"${"t".repeat(100)}"}}]}\n\n`);
    // The event over and over, cut every 65 000 bytes (inside events), as a fast origin sends.
    const period = new Uint8Array(event.length * 1000);
    for (let at = 0; at < period.length; at += event.length) period.set(event, at);
    const twice = new Uint8Array(period.length * 2);
    twice.set(period);
    twice.set(period, period.length);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 10 * 1024 * 1024) return controller.close();
        controller.enqueue(twice.subarray(sent % period.length, (sent % period.length) + 65_000));
        sent += 65_000;
      },
    });
    const { response, usage } = readUsage(new Response(body, { headers: sse }), {
      json: "usage.total_tokens",
    });
    let received = 0;
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    for (let read = await reader.read(); !read.done; read = await reader.read()) {
      received += read.value.length;
    }
    expect(received).toBe(sent);
    expect(await usage).toBeUndefined();
  });
});

describe("readUsage: a header", () => {
  it("resolves at once from a header that holds an integer, the response returned as is", async () => {
    const origin = new Response("body", { headers: { "X-Usage": " 42 " } });
    const { response, usage } = readUsage(origin, { header: "x-usage" });
    expect(response).toBe(origin);
    expect(await usage).toBe(42);
    expect(await response.text()).toBe("body");
  });

  it("has no usage for a missing or invalid value", async () => {
    for (const value of [
      undefined,
      "-1",
      "1.5",
      "abc",
      "1e3",
      "+4",
      "1000000000001",
      "",
      "12 13",
    ]) {
      const headers: Record<string, string> = value === undefined ? {} : { "X-Usage": value };
      const { usage } = readUsage(new Response("b", { headers }), { header: "X-Usage" });
      expect(await usage, String(value)).toBeUndefined();
    }
    const { usage } = readUsage(new Response("b", { headers: { "X-Usage": "1000000000000" } }), {
      header: "X-Usage",
    });
    expect(await usage).toBe(1e12);
  });

  it("reads a trailer, where the runtime exposes them, once the body has ended", async () => {
    const origin = handFed();
    const withTrailers = Object.assign(new Response(origin.body), {
      trailers: Promise.resolve(new Headers({ "X-Usage": "17" })),
    });
    const { response, usage } = readUsage(withTrailers, { header: "x-usage" });
    let resolved = false;
    void usage.then(() => (resolved = true));
    origin.send("part");
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    expect(resolved).toBe(false);
    origin.end();
    expect((await reader.read()).done).toBe(true);
    expect(await usage).toBe(17);
  });
});

describe("readUsage: an event stream cut short", () => {
  const start = 'data: {"type":"message_start","message":{"usage":{"input_tokens":25}}}\n\n';
  const paths = { json: ["message.usage.input_tokens", "usage.output_tokens"] };

  it("resolves with the usage already read when the client cancels, and cancels the origin", async () => {
    const origin = handFed();
    const { response, usage } = readUsage(new Response(origin.body, { headers: sse }), paths);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    origin.send(start);
    await reader.read();
    // The next event is cut before its end: not counted.
    origin.send('data: {"usage":{"output_tokens":9}}\n');
    await reader.read();
    await reader.cancel("client gone");
    expect(await usage).toBe(25);
    expect(origin.cancelled).toEqual(["client gone"]);
  });

  it("resolves with no usage when the client leaves before any was reported", async () => {
    const origin = handFed();
    const { response, usage } = readUsage(new Response(origin.body, { headers: sse }), paths);
    await (response.body as ReadableStream<Uint8Array>).cancel();
    expect(await usage).toBeUndefined();
    expect(origin.cancelled).toHaveLength(1);
  });

  it("resolves with the usage already read when the request's signal aborts", async () => {
    const origin = handFed();
    const client = new AbortController();
    const { response, usage } = readUsage(new Response(origin.body, { headers: sse }), paths, {
      signal: client.signal,
    });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    origin.send(start);
    await reader.read();
    client.abort(new Error("client gone"));
    expect(await usage).toBe(25);
    expect(origin.cancelled).toHaveLength(1);
    // Aborted before the reading began: no usage, the origin's body cancelled.
    const late = handFed();
    const reading = readUsage(new Response(late.body, { headers: sse }), paths, {
      signal: client.signal,
    });
    expect(await reading.usage).toBeUndefined();
    expect(late.cancelled).toHaveLength(1);
  });

  it("resolves when the client of workerd's native pipe (releasingAtEnd) goes away", async () => {
    const origin = handFed();
    const { response, usage } = readUsage(new Response(origin.body, { headers: sse }), paths);
    const out = releasingAtEnd(response, () => {});
    const reader = (out.body as ReadableStream<Uint8Array>).getReader();
    origin.send(start);
    await reader.read();
    await reader.cancel("client gone");
    // The pipe sees the cancel at the origin's next chunk (release-at-end.ts), then cancels ours:
    // that chunk was read from the origin, so the usage it reports counts.
    origin.send('data: {"usage":{"output_tokens":9}}\n\n');
    expect(await usage).toBe(34);
    expect(origin.cancelled).toHaveLength(1);
  });

  it("resolves with the usage already read when the origin fails, the failure handed on", async () => {
    const origin = handFed();
    const { response, usage } = readUsage(new Response(origin.body, { headers: sse }), paths);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    origin.send(start);
    await reader.read();
    origin.fail(new Error("origin broke off"));
    await expect(reader.read()).rejects.toThrow("origin broke off");
    expect(await usage).toBe(25);
  });
});

describe("readUsage: a spec", () => {
  it("refuses an empty path, an empty segment, no paths or an empty header name", () => {
    const response = new Response("{}", { headers: json });
    for (const spec of [{ json: "" }, { json: "a..b" }, { json: [] }, { json: ["a", ".b"] }]) {
      expect(() => readUsage(response, spec), JSON.stringify(spec)).toThrow(TypeError);
    }
    expect(() => readUsage(response, { header: " " })).toThrow(TypeError);
  });
});
