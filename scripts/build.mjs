// @ts-check
// npm run build: the package as users install it, in dist/ (tsconfig.build.json: ESM JavaScript,
// .d.ts, source maps, from the entries src/index.ts and src/server.ts and what they import).
// src/ imports its own files without an extension (moduleResolution "Bundler", which wrangler
// and vite read); Node's ESM loader and a consumer's tsc under "NodeNext" need the file named,
// so every relative specifier in the emitted .js and .d.ts gets the ".js" of the file tsc wrote
// (or "/index.js" for a folder).
// A specifier that names no emitted file stops the build. Node only.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dist = path.join(root, "dist");

rmSync(dist, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [path.join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.build.json"],
  { cwd: root, stdio: "inherit" },
);

/** @param {string} dir @returns {string[]} */
function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? files(full) : [full];
  });
}

// `from "./x"`, `import "./x"`, `import("./x")`: the emitted code has no other relative specifier.
const SPECIFIER = /(\bfrom\s+|\bimport\s*\(?\s*)(["'])(\.{1,2}\/[^"']*)\2/g;

let rewritten = 0;
for (const file of files(dist)) {
  if (!file.endsWith(".js") && !file.endsWith(".d.ts")) continue;
  const source = readFileSync(file, "utf8");
  const output = source.replace(SPECIFIER, (_match, lead, quote, specifier) => {
    if (specifier.endsWith(".js")) return `${lead}${quote}${specifier}${quote}`;
    const base = path.resolve(path.dirname(file), specifier);
    const named = [".js", "/index.js"].find((ending) => existsSync(base + ending));
    if (named === undefined) {
      throw new Error(`${path.relative(root, file)}: "${specifier}" names no file in dist/`);
    }
    rewritten += 1;
    return `${lead}${quote}${specifier}${named}${quote}`;
  });
  if (output !== source) writeFileSync(file, output);
}
// Every file package.json's `exports` names must be one the build wrote: an entry added to
// one and not to tsconfig.build.json would otherwise only fail in a user's install.
const manifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
for (const [entry, targets] of Object.entries(manifest.exports)) {
  for (const target of Object.values(targets)) {
    if (!existsSync(path.join(root, target))) {
      throw new Error(`package.json exports["${entry}"]: ${target} was not built`);
    }
  }
}
console.error(`[build] dist/ written; ${rewritten} relative import specifiers given their .js`);
