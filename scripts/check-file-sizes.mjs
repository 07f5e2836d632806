// The house keeps every library file short enough to read in one sitting: a file of src/ past
// MAX_LINES fails `npm run lint`, naming it, so a split is made when a change makes one long,
// not found later. Lines are counted as `wc -l` does (newlines).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const MAX_LINES = 320;
const root = fileURLToPath(new URL("..", import.meta.url));

const src = join(root, "src");
const over = [];
for (const name of readdirSync(src, { recursive: true, encoding: "utf8" })) {
  const path = join(src, name);
  if (!statSync(path).isFile()) continue;
  const lines = readFileSync(path, "utf8").split("\n").length - 1;
  if (lines > MAX_LINES) over.push(`${relative(root, path)}: ${lines} lines`);
}
if (over.length > 0) {
  console.error(
    `src/ files over ${MAX_LINES} lines (split them by concern):\n  ${over.join("\n  ")}`,
  );
  process.exit(1);
}
