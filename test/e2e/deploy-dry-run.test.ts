// docs/deploy.md works the first time: `wrangler deploy --dry-run` of this repo's worker
// (wrangler.toml, main = worker/worker.ts) bundles it without an account and binds the committed
// LIMITER_CONFIG. What the worker then does with that config is the workerd tests' business (they
// run with the same wrangler.toml).
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
// wrangler exports no subpath: its bin by path, as npm links it.
const WRANGLER = path.join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");
const outdir = mkdtempSync(path.join(os.tmpdir(), "edge-limiter-deploy-"));

afterAll(() => rmSync(outdir, { recursive: true, force: true }));

it("wrangler deploy --dry-run bundles the worker and binds LIMITER_CONFIG", async () => {
  const { code, output } = await new Promise<{ code: number; output: string }>((resolve) => {
    execFile(
      process.execPath,
      [WRANGLER, "deploy", "--dry-run", "--outdir", outdir],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          WRANGLER_SEND_METRICS: "false",
          NO_COLOR: "1",
          // Not logged in, and no account needed: a dry run must not ask for one.
          CLOUDFLARE_API_TOKEN: "",
          CLOUDFLARE_ACCOUNT_ID: "",
        },
      },
      (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, output: `${stdout}\n${stderr}` }),
    );
  });
  expect(code, output).toBe(0);
  expect(output).toContain("--dry-run: exiting now.");
  expect(output).toMatch(/env\.LIMITER_CONFIG \(.*\)\s+Environment Variable/s);
  const bundle = path.join(outdir, "worker.js");
  expect(existsSync(bundle)).toBe(true);
  expect(statSync(bundle).size).toBeGreaterThan(0);
}, 120_000);
