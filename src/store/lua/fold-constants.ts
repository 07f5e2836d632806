/**
 * Constant folding for the composed scripts: each `local NAME = <literal>` (an upper-case name, a
 * number, a quoted string or a boolean) that is never assigned again is dropped, and NAME replaced
 * by the literal everywhere. A name assigned later (GRACE) stays a local.
 *
 * Why: a script's body runs on every EVALSHA, and every function it defines is a closure made
 * again, with one upvalue allocated per local it captures. A constant written as a literal costs
 * nothing per call. Measured in Redis 7 (pipelined EVALSHA, a denial at limit 10 000): 0.2–0.4 µs
 * a call for the log scripts. The Lua sources keep their names, and read as Lua on their own.
 */
const CONSTANT = /^local ([A-Z][A-Z0-9_]*) = (-?\d+|'[^'\n]*'|true|false)\n/gm;

export function foldConstants(lua: string): string {
  const folded = new Map<string, string>();
  for (const [, name, value] of lua.matchAll(CONSTANT)) {
    if (!name || value === undefined) continue;
    if (folded.has(name)) throw new Error(`fold-constants: ${name} is declared twice`);
    const assigned = new RegExp(`(?<![\\w.])${name}\\s*=(?!=)`, "g");
    // Its declaration is the one assignment a constant has.
    if ((lua.match(assigned) ?? []).length === 1) folded.set(name, value);
  }
  let body = lua.replace(CONSTANT, (line, name: string) => (folded.has(name) ? "" : line));
  for (const [name, value] of folded) {
    body = body.replace(new RegExp(`(?<![\\w.])${name}(?!\\w)`, "g"), () => value);
  }
  return body;
}
