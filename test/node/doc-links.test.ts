import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// Every relative link in the README and the guides resolves: the file exists, and an anchor
// names a heading of it (GitHub's slugs). A moved section or a renamed heading fails here, not
// in a reader's browser.
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const DOCS = [
  "README.md",
  "CHANGELOG.md",
  "bench/README.md",
  ...readdirSync(path.join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor for a heading: lower-cased, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, "")
    .replace(/[^\p{L}\p{N}_\- ]/gu, "")
    .replace(/ /g, "-");
}

/** A Markdown text without its fenced code blocks (links and headings there are not ones). */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, "");
}

function anchorsOf(file: string): Set<string> {
  const text = prose(readFileSync(path.join(ROOT, file), "utf8"));
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1] ?? "")));
}

describe("links in the documentation", () => {
  it("the README is short: at most 300 lines, the quick start in its first 80", () => {
    const readme = readFileSync(path.join(ROOT, "README.md"), "utf8").split("\n");
    expect(readme.length).toBeLessThanOrEqual(300);
    expect(readme.findIndex((line) => line.startsWith("## Quick start"))).toBeLessThan(80);
  });

  it("there are guides in docs/", () => {
    expect(DOCS.filter((f) => f.startsWith("docs/")).length).toBeGreaterThanOrEqual(5);
  });

  for (const file of DOCS) {
    it(`${file}: every relative link names a file that exists, and a heading there`, () => {
      const text = prose(readFileSync(path.join(ROOT, file), "utf8"));
      const broken: string[] = [];
      for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1] ?? "";
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
        const [relative = "", anchor] = target.split("#");
        const resolved = relative === "" ? file : path.join(path.dirname(file), relative);
        if (!existsSync(path.join(ROOT, resolved))) {
          broken.push(`${target}: no file ${resolved}`);
          continue;
        }
        if (anchor !== undefined && resolved.endsWith(".md") && !anchorsOf(resolved).has(anchor)) {
          broken.push(`${target}: no heading #${anchor} in ${resolved}`);
        }
      }
      expect(broken).toEqual([]);
    });
  }
});
