// @ts-check
// A full ring whose limit alternates call by call, before and after (bench/measure/limit-change.mjs
// run as a child process: its own private redis-server, so INFO commandstats counts only its
// calls): Redis µs per call and the key's size after the alternations.
import { spawn } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { ROOT, tempDir } from "../../tools/infra.mjs";

/**
 * @typedef {{ limits: string, phase: string, contender: string, "µs/call": number,
 *   "median µs": number, "max µs": number, admitted: string, STRLEN: number,
 *   "MEMORY USAGE": number }} LimitChangeRow
 * @typedef {{ command: string, rows: LimitChangeRow[] }} LimitChangeResult
 */

/**
 * @param {{ quick: boolean, baseline?: string, progress: (message: string) => void }} options
 * @returns {Promise<LimitChangeResult>}
 */
export async function runLimitChange({ quick, baseline, progress }) {
  const dir = tempDir();
  const out = path.join(dir, "limit-change.json");
  const args = [
    "bench/measure/limit-change.mjs",
    `--calls=${quick ? 20 : 60}`,
    ...(baseline ? [`--baseline=${baseline}`] : []),
  ];
  const command = `node ${args.join(" ")}`;
  progress(`limit change: ${command}`);
  await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...args, "--json", out], {
      cwd: ROOT,
      stdio: ["ignore", "ignore", "inherit"],
    });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0
        ? resolve(undefined)
        : reject(new Error(`bench/measure/limit-change.mjs exited ${code}`)),
    );
  });
  const { rows } = JSON.parse(readFileSync(out, "utf8"));
  rmSync(dir, { recursive: true, force: true });
  return { command, rows };
}

/** @param {LimitChangeResult} result */
export function limitChangeMarkdown(result) {
  const lines = [
    "## A full ring whose limit alternates",
    "",
    `\`${result.command}\`: a key filled to 100 000 (1-hour window), then calls of cost 1`,
    "alternating two limits, 1 ms apart: *full* (every unit inside the window: all denied), then",
    "*draining* (a window on: 1 000 units leave each ms). Redis µs from `INFO commandstats` (the",
    "EVALSHA, read after every call: the max is one call's); STRLEN and MEMORY USAGE of the key",
    "after the case. The constant limit is the control: its draining max is a lap's whole",
    "rewrite, once per 100 000 admissions at any limit.",
    "",
    "| limits | phase | contender | µs/call | median µs | max µs | admitted | STRLEN | MEMORY USAGE |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of result.rows) {
    lines.push(
      `| ${r.limits} | ${r.phase} | ${r.contender} | ${r["µs/call"]} | ${r["median µs"]} | ${r["max µs"]} | ${r.admitted} | ${r.STRLEN} | ${r["MEMORY USAGE"]} |`,
    );
  }
  return `${lines.join("\n")}\n`;
}
