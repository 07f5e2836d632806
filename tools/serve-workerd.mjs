// @ts-check
// One worker bundle served by workerd alone, from a config of our own: no Miniflare around it.
//
// Why: Miniflare adds workers of its own to the workerd process the benchmark reads.
// Its entry worker, an isolate of its own, takes every request first: it copies the request twice
// (with a `cf` object), parses its URL three times, sets and deletes headers, matches routes,
// calls the user worker through a service binding and wraps its answer again. And every fetch
// the worker makes (the store call, the origin) goes out through a second one, which copies its
// headers to strip CF-Connecting-IP and fetches again (`stripCfConnectingIp`, on by default).
// Real CPU and latency, paid by no deployed worker: the Cloudflare edge runs the worker itself.
// So `npm run bench` serves each worker this way (`serveWorker` in infra.mjs), and the CPU
// section also serves ours and the minimal anchor through Miniflare, for comparison.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { fromMiniflare } from "./wrangler-deps.mjs";

let served = 0;

// The workerd wrangler's own Miniflare runs (and honouring the override Miniflare honours), so a
// worker served here and one served through Miniflare run the same binary.
/** @type {string} */
const WORKERD = process.env.MINIFLARE_WORKERD_PATH ?? fromMiniflare("workerd").default;

/**
 * A capnp text literal. JSON's escapes are capnp's too, except `\u`: a value with a character
 * outside printable ASCII (tab and newline aside) is refused rather than risk a wrong binding.
 * @param {string} value
 */
function capnpText(value) {
  if (!/^[\x20-\x7e\n\t]*$/.test(value)) {
    throw new Error(`serve-workerd: binding value not printable ASCII: ${value.slice(0, 40)}`);
  }
  return JSON.stringify(value);
}

/**
 * The config: the bundle as its one ES module, its text bindings, one HTTP socket on 127.0.0.1
 * (port 0: workerd picks a free one and says which on the control fd, so no other process can
 * take it between our choosing and its binding), and outbound fetches allowed to loopback and
 * private addresses (the bridge, a local origin), which workerd's default "internet" refuses.
 * `v8Flags`: V8's own flags for the process (`--max-old-space-size=32`: a heap cap, so that what
 * a worker keeps alive shows as the isolate's end rather than as resident memory that may be
 * garbage).
 * @param {{ module: string, bindings: Record<string, string>, compatibilityDate: string, compatibilityFlags?: string[] | undefined, v8Flags?: string[] | undefined }} o
 */
export function workerdConfig({
  module,
  bindings,
  compatibilityDate,
  compatibilityFlags,
  v8Flags,
}) {
  const vars = Object.entries(bindings)
    .map(([name, value]) => `(name = ${capnpText(name)}, text = ${capnpText(value)})`)
    .join(",\n        ");
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = (
      modules = [(name = ${capnpText(module)}, esModule = embed ${capnpText(module)})],
      compatibilityDate = ${capnpText(compatibilityDate)},
      compatibilityFlags = [${(compatibilityFlags ?? []).map(capnpText).join(", ")}],
      bindings = [
        ${vars}
      ],
      globalOutbound = "net",
    )),
    (name = "net", network = (allow = ["public", "private"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "main")],
  v8Flags = [${(v8Flags ?? []).map(capnpText).join(", ")}],
);
`;
}

/**
 * Serves `scriptPath` (a single-module bundle from `wrangler deploy --dry-run`) with workerd;
 * resolves once workerd says it listens (and its inspector, when asked for).
 * @param {{ scriptPath: string, bindings: Record<string, string>, compatibilityDate: string, compatibilityFlags?: string[] | undefined, inspector?: boolean | undefined, v8Flags?: string[] | undefined }} options
 *   inspector: workerd's V8 inspector on too (profiles), on a port of its choosing; v8Flags: see
 *   workerdConfig
 * @returns {Promise<{ url: string, pid: number | undefined, inspectorPort: number | undefined, dispose: () => Promise<void> }>}
 */
export async function serveWithWorkerd({
  scriptPath,
  bindings,
  compatibilityDate,
  compatibilityFlags,
  inspector,
  v8Flags,
}) {
  const dir = path.dirname(scriptPath);
  // One config per worker served (one bundle may be served twice, with other bindings).
  const config = path.join(dir, `workerd-${++served}.capnp`);
  writeFileSync(
    config,
    workerdConfig({
      module: path.basename(scriptPath),
      bindings,
      compatibilityDate,
      compatibilityFlags,
      v8Flags,
    }),
  );
  const args = ["serve", config, "--control-fd=3"];
  if (inspector) args.push("--inspector-addr=127.0.0.1:0");
  const child = spawn(WORKERD, args, { cwd: dir, stdio: ["ignore", "ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (d) => {
    stderr = (stderr + d).slice(-4000);
  });
  // "close", not "exit": stderr's last lines may arrive after the exit.
  const closed = new Promise((resolve) => child.once("close", resolve));
  const notServing = () => new Error(`workerd did not serve ${scriptPath}:\n${stderr.trim()}`);
  /** @type {Promise<never>} */
  const failed = new Promise((_, reject) => {
    child.once("error", reject);
    closed.then(() => reject(notServing()));
  });
  failed.catch(() => {}); // Its ending after a dispose is no error.
  const dispose = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    // workerd may wait on open connections: not for long (Miniflare does not wait at all).
    const timer = setTimeout(() => child.kill("SIGKILL"), 2000);
    await closed;
    clearTimeout(timer);
  };
  try {
    const ports = await Promise.race([listening(child, Boolean(inspector)), failed]);
    if (ports === undefined) {
      await closed;
      throw notServing();
    }
    return {
      url: `http://127.0.0.1:${ports.http}`,
      pid: child.pid,
      inspectorPort: ports.inspector,
      dispose,
    };
  } catch (error) {
    await dispose();
    throw error;
  }
}

/**
 * The ports workerd listens on, from its control messages (one JSON object a line on fd 3:
 * `{"event":"listen","socket":"http","port":…}`, and `{"event":"listen-inspector","port":…}`).
 * @param {import("node:child_process").ChildProcess} child
 * @param {boolean} inspector wait for the inspector too
 * @returns {Promise<{ http: number, inspector: number | undefined } | undefined>} undefined if
 *   workerd closed the fd first (it ended)
 */
async function listening(child, inspector) {
  const control = child.stdio[3];
  if (!control || !("on" in control)) throw new Error("serve-workerd: no control fd");
  /** @type {number | undefined} */
  let http;
  /** @type {number | undefined} */
  let inspectorPort;
  for await (const line of createInterface({ input: /** @type {any} */ (control) })) {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      continue;
    }
    if (message.event === "listen" && message.socket === "http") http = message.port;
    if (message.event === "listen-inspector") inspectorPort = message.port;
    if (http !== undefined && (!inspector || inspectorPort !== undefined)) {
      return { http, inspector: inspectorPort };
    }
  }
  return undefined;
}
