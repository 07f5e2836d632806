// @ts-check
// The exact log (the ring) beside the anchor: commands and Redis µs per
// decision and bytes per full key at limits 10 … 100 000, from scripts/measure-log-layouts.mjs run
// as a child process (its own private redis-server, so INFO commandstats counts only its calls).
import { spawn } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { ROOT, tempDir } from "./infra.mjs";

/**
 * @typedef {{ contender: string, limit: number, bytes: number, "bytes/unit": number,
 *   "admitted: cmds": number, "admitted: µs": number, "denied: cmds": number, "denied: µs": number
 * }} LayoutRow
 * @typedef {{ command: string, decisions: number, rows: LayoutRow[] }} LayoutResult
 */

/**
 * @param {{ quick: boolean, progress: (message: string) => void }} options
 * @returns {Promise<LayoutResult>}
 */
export async function runLogLayouts({ quick, progress }) {
  const dir = tempDir();
  const out = path.join(dir, "layouts.json");
  const env = quick
    ? { ROUNDS: "1", LIMITS: "10,100,1000" }
    : { ROUNDS: "15", LIMITS: "10,100,1000,10000,100000" };
  const decisions = quick ? 200 : 500;
  const args = ["scripts/measure-log-layouts.mjs", String(decisions), "--json", out];
  const command = `ROUNDS=${env.ROUNDS} LIMITS=${env.LIMITS} node ${args.slice(0, 2).join(" ")}`;
  progress(`log layouts: ${command}`);
  await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "ignore", "inherit"],
    });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve(undefined) : reject(new Error(`measure-log-layouts exited ${code}`)),
    );
  });
  const { rows } = JSON.parse(readFileSync(out, "utf8"));
  rmSync(dir, { recursive: true, force: true });
  return { command, decisions, rows };
}

/** @param {LayoutResult} result */
export function logLayoutsMarkdown(result) {
  const lines = [
    "## The exact log (the ring) and the anchor",
    "",
    `\`${result.command}\`: a key full to its limit, ${result.decisions} steady admissions (each frees`,
    "and takes one slot) then as many denials per round, the limits alternated, medians; Redis µs",
    "from `INFO commandstats` (the script's whole run), commands include the `EVALSHA`, on the",
    "caller's clock (add one `TIME` for the Redis clock). The anchor's figures do not depend on the",
    "limit. (The retired sorted set's last figures beside the ring: docs/algorithms.md.)",
    "",
    "| limit | contender | bytes per full key | bytes / unit | commands, admitted | Redis µs, admitted | commands, denied | Redis µs, denied |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const row of result.rows) {
    lines.push(
      `| ${row.limit} | ${row.contender} | ${row.bytes} | ${row["bytes/unit"]} | ${row["admitted: cmds"]} | ${row["admitted: µs"]} | ${row["denied: cmds"]} | ${row["denied: µs"]} |`,
    );
  }
  return `${lines.join("\n")}\n`;
}
