// @ts-check
// What reading usage costs a streamed response (src/http/usage-reader.ts), in Node, side by side
// in one run: the body handed on as it is (plain), through a pull stream that only forwards
// (the reader's wrapping alone), and through readUsage (wrapping + scanning). CPU per MB and per
// streamed response, and the time a first chunk takes to reach the consumer, in-process and
// through a loopback HTTP origin. Contenders alternate within every repetition; medians reported.
//
//   node bench/usage-reader-bench.mjs [--reps=N] [--trials=N]
import { createServer } from "node:http";
import { cpuUsage } from "node:process";
import { tempDir } from "../tools/infra.mjs";
import { bundleForNode } from "./lib/library.mjs";

const arg = (/** @type {string} */ name, /** @type {number} */ fallback) => {
  const found = process.argv.find((a) => a.startsWith(`--${name}=`));
  return found ? Number(found.split("=")[1]) : fallback;
};
const REPS = arg("reps", 15);
const TRIALS = arg("trials", 2000);

/** @type {{ readUsage: (r: Response, spec: object) => { response: Response, usage: Promise<number | undefined> }, SseUsageScanner: any, compilePaths: (p: string | string[]) => object[] }} */
const lib = await bundleForNode(tempDir(), "usage-reader", [
  `export { readUsage } from "./src/http/usage-reader.ts";`,
  `export { SseUsageScanner } from "./src/http/sse-usage.ts";`,
  `export { compilePaths } from "./src/http/usage-paths.ts";`,
]);

const encoder = new TextEncoder();
const SSE = { "Content-Type": "text/event-stream" };
const JSON_TYPE = { "Content-Type": "application/json" };
const SPEC = { json: "usage.total_tokens" };

/** An OpenAI chat stream of `tokens` content events (one chunk each), usage in the last. */
function openaiChunks(/** @type {number} */ tokens) {
  const chunks = [];
  for (let i = 0; i < tokens; i++) {
    chunks.push(
      encoder.encode(
        `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-x","choices":[{"index":0,"delta":{"content":" tok${i}"},"finish_reason":null}],"usage":null}\n\n`,
      ),
    );
  }
  chunks.push(
    encoder.encode(
      `data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":${tokens},"total_tokens":${tokens + 20}}}\n\ndata: [DONE]\n\n`,
    ),
  );
  return chunks;
}

/** `megabytes` of the same stream's events cut every 16 000 bytes (a fast origin; cuts fall
 * inside events). */
function bulkChunks(/** @type {number} */ megabytes) {
  const one = openaiChunks(1)[0] ?? new Uint8Array();
  const period = new Uint8Array(one.length * 200);
  for (let at = 0; at < period.length; at += one.length) period.set(one, at);
  const twice = new Uint8Array(period.length * 2);
  twice.set(period);
  twice.set(period, period.length);
  const chunks = [];
  for (let at = 0; at < megabytes * 1024 * 1024; at += 16_000) {
    chunks.push(twice.subarray(at % period.length, (at % period.length) + 16_000));
  }
  return chunks;
}

/** A JSON body of about `kilobytes`, usage at its end, in 16 KiB chunks. */
function jsonChunks(/** @type {number} */ kilobytes) {
  const text = JSON.stringify({
    data: Array.from({ length: Math.floor((kilobytes * 1024) / 100) }, (_, i) => ({
      id: i,
      v: "x".repeat(80),
    })),
    usage: { total_tokens: 123 },
  });
  const bytes = encoder.encode(text);
  const chunks = [];
  for (let at = 0; at < bytes.length; at += 16 * 1024)
    chunks.push(bytes.subarray(at, at + 16 * 1024));
  return chunks;
}

/** A response whose body yields these chunks, one per pull. */
function origin(/** @type {Uint8Array[]} */ chunks, /** @type {Record<string, string>} */ headers) {
  let i = 0;
  const body = new ReadableStream({
    pull(controller) {
      if (i < chunks.length) controller.enqueue(chunks[i++]);
      else controller.close();
    },
  });
  return new Response(body, { headers });
}

/** The reader's wrapping alone: a queue-less pull stream that forwards and scans nothing. */
function forwarding(/** @type {Response} */ response) {
  const reader = /** @type {ReadableStream<Uint8Array>} */ (response.body).getReader();
  const body = new ReadableStream(
    {
      async pull(controller) {
        const read = await reader.read();
        if (read.done) controller.close();
        else controller.enqueue(read.value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
  return new Response(body, response);
}

/** @type {Record<string, (r: Response) => Response>} */
const CONTENDERS = {
  plain: (r) => r,
  forwarding,
  readUsage: (r) => lib.readUsage(r, SPEC).response,
};

async function drain(/** @type {Response} */ response) {
  const reader = /** @type {ReadableStream<Uint8Array>} */ (response.body).getReader();
  let bytes = 0;
  for (let read = await reader.read(); !read.done; read = await reader.read())
    bytes += read.value.length;
  return bytes;
}

const median = (/** @type {number[]} */ xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};
const pct = (/** @type {number[]} */ xs, /** @type {number} */ p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))] ?? Number.NaN;
};

/** CPU µs of draining `responses` responses of `chunks`, per contender, alternated; medians. */
/**
 * @param {Uint8Array[]} chunks
 * @param {Record<string, string>} headers
 * @param {number} responses
 */
async function cpuOf(chunks, headers, responses) {
  const bytes = chunks.reduce((n, c) => n + c.length, 0) * responses;
  /** @type {Record<string, number[]>} */
  const samples = Object.fromEntries(Object.keys(CONTENDERS).map((k) => [k, []]));
  for (let rep = -2; rep < REPS; rep++) {
    for (const [name, wrap] of Object.entries(CONTENDERS)) {
      const before = cpuUsage();
      for (let i = 0; i < responses; i++) await drain(wrap(origin(chunks, headers)));
      const used = cpuUsage(before);
      if (rep >= 0) samples[name]?.push(used.user + used.system);
    }
  }
  return Object.fromEntries(
    Object.entries(samples).map(([name, xs]) => {
      const us = median(xs);
      return [name, { perMB: us / (bytes / 1024 / 1024), perResponse: us / responses }];
    }),
  );
}

/** µs from the origin's first enqueue to the consumer's first chunk, in-process. */
async function firstChunkInProcess() {
  /** @type {Record<string, number[]>} */
  const samples = Object.fromEntries(Object.keys(CONTENDERS).map((k) => [k, []]));
  const first = encoder.encode('data: {"choices":[]}\n\n');
  for (let trial = 0; trial < TRIALS; trial++) {
    for (const [name, wrap] of Object.entries(CONTENDERS)) {
      /** @type {ReadableStreamDefaultController<Uint8Array>} */
      let controller = /** @type {any} */ (undefined);
      const body = new ReadableStream({
        start(c) {
          controller = c;
        },
      });
      const response = wrap(new Response(body, { headers: SSE }));
      const reader = /** @type {ReadableStream<Uint8Array>} */ (response.body).getReader();
      const reading = reader.read();
      await new Promise((resolve) => setImmediate(resolve));
      const start = performance.now();
      controller.enqueue(first);
      await reading;
      samples[name]?.push((performance.now() - start) * 1000);
      await reader.cancel();
    }
  }
  return samples;
}

/** ms from fetch() to the first chunk from a loopback origin that streams an event at once. */
async function firstChunkOverHttp() {
  const server = createServer((_req, res) => {
    res.writeHead(200, SSE);
    res.write('data: {"choices":[]}\n\n');
    setTimeout(() => res.end('data: {"usage":{"total_tokens":5}}\n\n'), 2);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
  const address = server.address();
  const url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/`;
  /** @type {Record<string, number[]>} */
  const samples = Object.fromEntries(Object.keys(CONTENDERS).map((k) => [k, []]));
  const trials = Math.max(50, Math.floor(TRIALS / 4));
  for (let trial = -20; trial < trials; trial++) {
    for (const [name, wrap] of Object.entries(CONTENDERS)) {
      const start = performance.now();
      const response = wrap(await fetch(url));
      const reader = /** @type {ReadableStream<Uint8Array>} */ (response.body).getReader();
      await reader.read();
      if (trial >= 0) samples[name]?.push(performance.now() - start);
      while (!(await reader.read()).done) {}
    }
  }
  server.close();
  return samples;
}

/** The scanner's most characters held over a 10 MB event stream without usage. */
function scannerPeak() {
  const scanner = new lib.SseUsageScanner(lib.compilePaths("usage.total_tokens"));
  for (const chunk of bulkChunks(10)) scanner.push(chunk);
  return { usage: scanner.finish(true), peak: scanner.peakHeldLength };
}

const fmt = (/** @type {number} */ x, digits = 1) => x.toFixed(digits);
console.log(`usage reader bench (Node ${process.version}, ${REPS} reps, ${TRIALS} trials)\n`);
/** @type {[label: string, chunks: Uint8Array[], headers: Record<string, string>, responses: number][]} */
const workloads = [
  ["SSE, 2 000 tokens (one event a chunk, ~0.4 MB), ×20", openaiChunks(2000), SSE, 20],
  ["SSE, 8 MB in 16 000-byte chunks", bulkChunks(8), SSE, 1],
  ["JSON body ~1 MB in 16 KiB chunks, ×4", jsonChunks(960), JSON_TYPE, 4],
];
console.log(
  "CPU (user+sys, median)     | plain µs/MB | forwarding µs/MB | readUsage µs/MB | readUsage − plain, µs per response",
);
for (const [label, chunks, headers, responses] of workloads) {
  const cpu = await cpuOf(chunks, headers, responses);
  const added = (cpu.readUsage?.perResponse ?? 0) - (cpu.plain?.perResponse ?? 0);
  console.log(
    `${label}: ${fmt(cpu.plain?.perMB ?? 0, 0)} | ${fmt(cpu.forwarding?.perMB ?? 0, 0)} | ${fmt(cpu.readUsage?.perMB ?? 0, 0)} | ${fmt(added, 0)}`,
  );
}
const inProcess = await firstChunkInProcess();
console.log("\nfirst chunk, origin enqueue → consumer, in-process (µs): p50 / p99");
for (const [name, xs] of Object.entries(inProcess)) {
  console.log(`  ${name}: ${fmt(pct(xs, 50))} / ${fmt(pct(xs, 99))}`);
}
const overHttp = await firstChunkOverHttp();
console.log("\ntime to first byte, fetch() from a loopback origin → consumer (ms): p50 / p99");
for (const [name, xs] of Object.entries(overHttp)) {
  console.log(`  ${name}: ${fmt(pct(xs, 50), 3)} / ${fmt(pct(xs, 99), 3)}`);
}
const peak = scannerPeak();
console.log(
  `\n10 MB event stream without usage: usage ${peak.usage}, scanner's most characters held ${peak.peak}`,
);
