import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// The tests and the bench share their helpers through tools/ and nothing else: a test that
// imports bench/ would break when the bench changes a figure's plumbing, and a bench that imports
// test/ would measure with whatever a test needed. tools/ itself imports neither.
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const CODE = /\.(?:[cm]?[jt]s|tsx?)$/;

function codeFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && CODE.test(e.name))
    .map((e) => path.relative(ROOT, path.join(e.parentPath, e.name)))
    .filter(
      (f) =>
        !f.split(path.sep).includes("node_modules") && !f.includes(`${path.sep}out${path.sep}`),
    );
}

/** The relative specifiers a module imports, statically, dynamically or as a type. */
function importsOf(text: string): string[] {
  const found = text.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g);
  return [...found].map((m) => m[1] ?? "");
}

/** Each import of `from`'s code files that lands in one of the `forbidden` top-level folders. */
function crossings(from: string, forbidden: string[]): string[] {
  return codeFiles(from).flatMap((file) =>
    importsOf(readFileSync(path.join(ROOT, file), "utf8"))
      .map((spec) => ({ spec, target: path.relative(ROOT, path.join(path.dirname(file), spec)) }))
      .filter(({ target }) => forbidden.includes(target.split(path.sep)[0] ?? ""))
      .map(({ spec }) => `${file} imports ${spec}`),
  );
}

describe("folder imports", () => {
  it("finds an import in each form it checks", () => {
    // Built, so that this file's own text imports nothing it forbids.
    const b = "bench";
    const text = [
      `import { a } from "../../${b}/lib/x.mjs";`,
      `import type { B } from "../${b}/y";`,
      `const c = await import("../${b}/z.mjs");`,
      'export { d } from "./d.js";',
      'import "node:fs";',
    ].join("\n");
    expect(importsOf(text)).toEqual([
      `../../${b}/lib/x.mjs`,
      `../${b}/y`,
      `../${b}/z.mjs`,
      "./d.js",
    ]);
  });

  it("no test imports bench/", () => {
    expect(crossings("test", ["bench"])).toEqual([]);
  });

  it("bench/ imports nothing from test/", () => {
    expect(crossings("bench", ["test"])).toEqual([]);
  });

  it("tools/ imports neither test/ nor bench/", () => {
    expect(crossings("tools", ["test", "bench"])).toEqual([]);
  });
});
