// @ts-check
// The package.json an installer gets: `npm pack` and `npm publish` run `prepack` (strip) before
// packing and `postpack` (restore) after, so the tarball's package.json has only what installing
// and importing the package need (no scripts, no devDependencies), and the checkout keeps its
// own. The original is kept beside it until restored; a strip that finds one there restores it
// first (a pack that stopped half way).
//   node scripts/pack-manifest.mjs strip|restore
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const manifest = path.join(root, "package.json");
const kept = path.join(root, ".package.json.packing");

/** The fields an installer reads, in this order; everything else is for working on the package. */
const INSTALLED = [
  "name",
  "version",
  "description",
  "keywords",
  "license",
  "repository",
  "type",
  "exports",
  "types",
  "files",
  "sideEffects",
  "engines",
  "dependencies",
  "peerDependencies",
  "peerDependenciesMeta",
];

const step = process.argv[2];
if (step === "strip") {
  if (existsSync(kept)) renameSync(kept, manifest);
  const full = JSON.parse(readFileSync(manifest, "utf8"));
  writeFileSync(kept, readFileSync(manifest));
  const installed = Object.fromEntries(
    INSTALLED.filter((field) => full[field] !== undefined).map((field) => [field, full[field]]),
  );
  writeFileSync(manifest, `${JSON.stringify(installed, null, 2)}\n`);
} else if (step === "restore") {
  if (existsSync(kept)) renameSync(kept, manifest);
} else {
  console.error("usage: node scripts/pack-manifest.mjs strip|restore");
  process.exit(2);
}
