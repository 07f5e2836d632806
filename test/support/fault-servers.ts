// A deliberately broken network boundary between the limiter and the store: one HTTP server
// whose behaviour is chosen per scenario (the first path segment), so test files running at the
// same time never share a fault. Everything else is real: "forward" relays to the real bridge.
//
//   POST /__control/<scenario>  {"mode", "delayMs"?, "target"?}  sets the scenario's fault
//   GET  /__stats/<scenario>                                     what the server saw
//   POST /<scenario>/<path>                                      the store endpoint under test
import { createHash } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { FaultMode, FaultStats } from "./fault-types.js";

interface Scenario {
  mode: FaultMode;
  delayMs: number;
  target: string;
  stats: FaultStats;
}

/** The refusal's wording: a store naming the command it will not run in a script. */
const TIME_REFUSAL = "ERR fault server: command TIME is not allowed in scripts (non deterministic)";

export interface FaultServer {
  url: string;
  /** A URL on which nothing listens (connection refused). */
  refusedUrl: string;
  close(): Promise<void>;
}

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

export async function startFaultServer(): Promise<FaultServer> {
  const scenarios = new Map<string, Scenario>();
  const scenario = (name: string): Scenario => {
    let found = scenarios.get(name);
    if (!found) {
      found = {
        mode: "forward",
        delayMs: 0,
        target: "",
        stats: { requests: 0, forwarded: 0, dropped: 0, clientClosed: 0, pending: 0 },
      };
      scenarios.set(name, found);
    }
    return found;
  };

  // Scripts seen by EVAL/EVAL_RO in "refuse-time" scenarios, by SHA-1 (across scenarios: one
  // server).
  const scripts = new Map<string, string>();

  /**
   * "refuse-time": one command as a store that forbids TIME in scripts would run it. Returns an
   * error text, or the command to relay: a script (EVALSHA of a known one too, as its text) is
   * relayed with every TIME call made to raise the refusal, so Redis itself decides whether the
   * script reaches TIME (whatever ARGV carries its clock) and nothing else changes.
   */
  function refuseTime(command: unknown[]): { error: string } | { relay: unknown[] } {
    const [name = "", first = ""] = command.map((v) => String(v));
    const verb = name.toUpperCase();
    const byText = verb === "EVAL" || verb === "EVAL_RO";
    if (!byText && verb !== "EVALSHA" && verb !== "EVALSHA_RO") return { relay: command };
    const script = byText ? first : scripts.get(first.toLowerCase());
    if (script === undefined) {
      return { error: "NOSCRIPT No matching script. Please use EVAL." };
    }
    if (byText) scripts.set(createHash("sha1").update(script).digest("hex"), script);
    const refusing = script.replaceAll("redis.call('TIME')", `error({err='${TIME_REFUSAL}'})`);
    return { relay: [verb.endsWith("_RO") ? "EVAL_RO" : "EVAL", refusing, ...command.slice(2)] };
  }

  async function relayOne(s: Scenario, req: http.IncomingMessage, command: unknown[]) {
    const answer = await forward(s, "", req, Buffer.from(JSON.stringify(command)));
    const parsed = JSON.parse(answer.body) as { result?: unknown; error?: string };
    if (parsed.error?.includes(TIME_REFUSAL)) s.stats.refusedTime = (s.stats.refusedTime ?? 0) + 1;
    return parsed;
  }

  /** "refuse-time" for a single command (`/`) or a pipeline (`/pipeline`). */
  async function refusingTime(s: Scenario, path: string, req: http.IncomingMessage, body: Buffer) {
    const parsed = JSON.parse(body.toString() || "[]") as unknown[];
    if (path === "pipeline") {
      const out = [];
      for (const command of parsed as unknown[][]) {
        const decided = refuseTime(command);
        out.push("error" in decided ? decided : await relayOne(s, req, decided.relay));
      }
      return { status: 200, body: JSON.stringify(out) };
    }
    const decided = refuseTime(parsed);
    if ("error" in decided) return { status: 400, body: JSON.stringify(decided) };
    const answer = await relayOne(s, req, decided.relay);
    return { status: answer.error === undefined ? 200 : 400, body: JSON.stringify(answer) };
  }

  async function forward(s: Scenario, path: string, req: http.IncomingMessage, body: Buffer) {
    s.stats.forwarded++;
    const headers: Record<string, string> = {};
    for (const name of [
      "authorization",
      "content-type",
      "upstash-encoding",
      "upstash-sync-token",
    ]) {
      const value = req.headers[name];
      if (typeof value === "string") headers[name] = value;
    }
    const res = await fetch(`${s.target}/${path}`, {
      method: "POST",
      headers,
      body: new Uint8Array(body),
    });
    return { status: res.status, type: res.headers.get("content-type"), body: await res.text() };
  }

  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://fault");
    const [first = "", second = "", ...rest] = url.pathname.slice(1).split("/");
    try {
      if (first === "__control") {
        const s = scenario(second);
        const body = JSON.parse((await readBody(req)).toString() || "{}");
        s.mode = body.mode ?? s.mode;
        s.delayMs = body.delayMs ?? s.delayMs;
        s.target = body.target ?? s.target;
        res.writeHead(204).end();
        return;
      }
      if (first === "__stats") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(scenario(second).stats));
        return;
      }
      const s = scenario(first);
      s.stats.requests++;
      for (const name of ["upstash-encoding", "upstash-sync-token"]) {
        if (req.headers[name] === undefined) continue;
        s.stats.headers = { ...s.stats.headers, [name]: (s.stats.headers?.[name] ?? 0) + 1 };
      }
      s.stats.pending++;
      let finished = false;
      const finish = () => {
        if (!finished) s.stats.pending--;
        finished = true;
      };
      // The response's "close" before it was sent means the client hung up (an abort).
      res.on("close", () => {
        if (!res.writableFinished) s.stats.clientClosed++;
        if (s.mode !== "delay-forward" && s.mode !== "late-answer" && s.mode !== "mostly-late") {
          finish();
        }
      });
      const body = await readBody(req);
      const path = [second, ...rest].join("/");
      switch (s.mode) {
        case "hang":
          return;
        case "reset":
          req.socket.resetAndDestroy();
          return;
        case "error-500":
          res.writeHead(500, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: "ERR fault server: internal error" }));
          return;
        case "garbage":
          res.writeHead(200, { "content-type": "text/html" });
          res.end("<html>this is not the store</html>");
          return;
        case "delay-forward": {
          await new Promise((resolve) => setTimeout(resolve, s.delayMs));
          if (res.destroyed || req.socket.destroyed) {
            s.stats.dropped++;
            finish();
            return;
          }
          const answer = await forward(s, path, req, body);
          finish();
          res.writeHead(answer.status, { "content-type": answer.type ?? "application/json" });
          res.end(answer.body);
          return;
        }
        case "mostly-late":
        case "late-answer": {
          const late = s.mode === "late-answer" || s.stats.requests % 4 !== 0;
          const answer = await forward(s, path, req, body);
          s.stats.answered = (s.stats.answered ?? 0) + 1;
          if (late) await new Promise((resolve) => setTimeout(resolve, s.delayMs));
          finish();
          if (res.destroyed || req.socket.destroyed) return;
          res.writeHead(answer.status, { "content-type": answer.type ?? "application/json" });
          res.end(answer.body);
          return;
        }
        case "refuse-time": {
          const answer = await refusingTime(s, path, req, body);
          res.writeHead(answer.status, { "content-type": "application/json" });
          res.end(answer.body);
          return;
        }
        default: {
          const answer = await forward(s, path, req, body);
          res.writeHead(answer.status, { "content-type": answer.type ?? "application/json" });
          res.end(answer.body);
        }
      }
    } catch (error) {
      if (!res.headersSent) res.writeHead(502, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: `fault server: ${String(error)}` }));
    }
  });
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  // A port that was just free and is closed again: connecting to it is refused.
  const probe = http.createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const refusedPort = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));

  return {
    url: `http://127.0.0.1:${port}`,
    refusedUrl: `http://127.0.0.1:${refusedPort}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
