/**
 * The Redis commands a piece of work ran, counted by INFO commandstats on a private redis-server
 * (a shared one counts everyone's traffic): what pins a script's reads and writes, whose answers
 * stay right when a regression adds a command.
 */

/** `redis-cli` against the private server: its output as text. */
export type Cli = (...args: (string | number)[]) => string;

/** The commands `work` ran inside scripts, by name (EVAL/EVALSHA themselves left out). */
export function commandsDuring(cli: Cli, work: () => void): Record<string, number> {
  cli("CONFIG", "RESETSTAT");
  work();
  const counts: Record<string, number> = {};
  for (const line of cli("INFO", "commandstats").split("\n")) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (!match?.[1] || /^(eval|info|config)/.test(match[1])) continue;
    counts[match[1]] = Number(match[2]);
  }
  return counts;
}
