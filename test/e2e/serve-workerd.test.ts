// tools/serve-workerd.mjs: the benchmark's CPU section serves each worker with workerd alone
// (no Miniflare entry worker in front). What the figures rest on: the worker gets its bindings
// byte for byte (LIMITER_CONFIG is JSON, quotes and all), its store and origin are loopback
// addresses (workerd's default outbound refuses those), the pid read is that workerd's, and
// dispose ends it.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { serveWithWorkerd, workerdConfig } from "../../tools/serve-workerd.mjs";

const dir = mkdtempSync(path.join(os.tmpdir(), "edge-limiter-serve-workerd-"));
let origin: Server;
let originUrl = "";

beforeAll(async () => {
  origin = createServer((_req, res) => res.end("from the loopback origin"));
  await new Promise<void>((resolve) => origin.listen(0, "127.0.0.1", resolve));
  originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}/`;
});

afterAll(async () => {
  await new Promise((resolve) => origin.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

it("serves a bundle with its bindings verbatim and loopback outbound, and dispose ends it", async () => {
  const scriptPath = path.join(dir, "worker.js");
  writeFileSync(
    scriptPath,
    `export default {
      async fetch(request, env) {
        const upstream = await (await fetch(env.ORIGIN_URL)).text();
        return Response.json({ config: env.LIMITER_CONFIG, note: env.NOTE, upstream, cf: request.cf });
      },
    };`,
  );
  const config = JSON.stringify({ rules: [{ name: 'a "b"\\c' }], note: "line\nbreak\ttab" });
  // Raw quotes, a backslash, a newline and a tab, not JSON's escapes of them.
  const note = 'say "hi"\\ then\na\ttab';
  const served = await serveWithWorkerd({
    scriptPath,
    bindings: { LIMITER_CONFIG: config, NOTE: note, ORIGIN_URL: originUrl },
    compatibilityDate: "2026-11-10",
  });
  const pid = served.pid;
  try {
    const answer = (await (await fetch(`${served.url}/check`)).json()) as Record<string, unknown>;
    // Nothing in front: workerd's own `cf` (the client's address) and no more. Miniflare's entry
    // worker would have added its whole `cf` blob (colo, country, clientAcceptEncoding, …).
    expect(answer).toMatchObject({ config, note, upstream: "from the loopback origin" });
    expect(Object.keys(answer.cf as object)).toEqual(["clientIp"]);
    expect(pid).toBeTypeOf("number");
    expect(readFileSync(`/proc/${pid}/comm`, "utf8")).toMatch(/^workerd/);
  } finally {
    await served.dispose();
  }
  expect(existsSync(`/proc/${pid}`)).toBe(false);
}, 60_000);

it("refuses a binding it cannot write as a capnp literal, rather than bind it wrong", () => {
  const config = (value: string) =>
    workerdConfig({
      module: "worker.js",
      bindings: { LIMITER_CONFIG: value },
      compatibilityDate: "2026-11-10",
    });
  expect(config('{"key":"ip"}')).toContain('text = "{\\"key\\":\\"ip\\"}"');
  expect(() => config('{"name":"café"}')).toThrow(/not printable ASCII/);
});
