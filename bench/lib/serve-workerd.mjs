// @ts-check
// One worker bundle served by workerd alone, from a config of our own: no Miniflare in front.
//
// Why (issue 12): Miniflare serves a worker behind its own entry worker, a second isolate in the
// same workerd process that every request goes through first: it copies the request twice (with
// a `cf` object), parses its URL three times, sets and deletes headers, matches routes, calls the
// user worker through a service binding and wraps its answer again. That is real CPU in the
// process the benchmark reads, paid by every contender alike and by no deployed worker (the
// Cloudflare edge runs the worker itself). `npm run bench` reads the workerd CPU of the worker
// as deployed, so it serves each worker this way; `serveWorker` (Miniflare) stays for what needs
// Miniflare's features (the inspector of bench/profile-workerd.mjs).
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { freePort } from "../../scripts/lib/ports.mjs";

// The workerd wrangler's own Miniflare runs: the runtime the bundle is built for.
const fromWrangler = createRequire(createRequire(import.meta.url).resolve("wrangler/package.json"));
const fromMiniflare = createRequire(fromWrangler.resolve("miniflare/package.json"));
/** @type {string} */
const WORKERD = fromMiniflare("workerd").default;

/**
 * A capnp text literal. JSON's escapes are capnp's too, except `\u`: a value with a character
 * outside printable ASCII is refused rather than risk a wrong binding.
 * @param {string} value
 */
function capnpText(value) {
  if (!/^[\x20-\x7e\n\t]*$/.test(value)) {
    throw new Error(`serve-workerd: binding value not printable ASCII: ${value.slice(0, 40)}`);
  }
  return JSON.stringify(value);
}

/**
 * The config: the bundle as its one ES module, its text bindings, one HTTP socket on 127.0.0.1,
 * and outbound fetches allowed to loopback addresses (the bridge, a local origin), which
 * workerd's default "internet" service refuses.
 * @param {{ module: string, bindings: Record<string, string>, port: number, compatibilityDate: string }} o
 */
export function workerdConfig({ module, bindings, port, compatibilityDate }) {
  const vars = Object.entries(bindings)
    .map(([name, value]) => `(name = ${capnpText(name)}, text = ${capnpText(value)})`)
    .join(",\n        ");
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = (
      modules = [(name = ${capnpText(module)}, esModule = embed ${capnpText(module)})],
      compatibilityDate = ${capnpText(compatibilityDate)},
      bindings = [
        ${vars}
      ],
      globalOutbound = "net",
    )),
    (name = "net", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
`;
}

/**
 * Serves `scriptPath` (a single-module bundle from `wrangler deploy --dry-run`) with workerd on a
 * free port; resolves once it answers.
 * @param {{ scriptPath: string, bindings: Record<string, string>, compatibilityDate: string }} options
 * @returns {Promise<{ url: string, pid: number | undefined, dispose: () => Promise<void> }>}
 */
export async function serveWithWorkerd({ scriptPath, bindings, compatibilityDate }) {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const dir = path.dirname(scriptPath);
    const config = path.join(dir, `workerd-${port}.capnp`);
    writeFileSync(
      config,
      workerdConfig({ module: path.basename(scriptPath), bindings, port, compatibilityDate }),
    );
    const child = spawn(WORKERD, ["serve", config, "--experimental"], {
      cwd: dir,
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr?.on("data", (d) => {
      stderr = (stderr + d).slice(-4000);
    });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    const dispose = async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        await exited;
      }
    };
    const url = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 200 && child.exitCode === null; i++) {
      try {
        await fetch(`${url}/__ready`);
        return { url, pid: child.pid, dispose };
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    await dispose();
    // A port taken between freePort() and workerd's bind: try another (see serveWorker).
    if (/address already in use/i.test(stderr) && attempt < 3) continue;
    throw new Error(`workerd did not serve ${scriptPath}:\n${stderr.trim()}`);
  }
}
