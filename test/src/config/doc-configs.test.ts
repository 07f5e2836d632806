// Every configuration a guide shows (a ```json block of rules, or of one rule) is one the worker
// accepts: a reader who copies it gets limits, not a 503 naming a field.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/limiter-config";

declare global {
  interface ImportMeta {
    /** Vite's: the files a pattern matches, read at build time. */
    glob(
      pattern: readonly string[],
      options: { query: "?raw"; import: "default"; eager: true },
    ): Record<string, string>;
  }
}

const GUIDES = import.meta.glob(["../../../docs/*.md", "../../../README.md"], {
  query: "?raw",
  import: "default",
  eager: true,
});

/** The JSON blocks of a guide that parse as a configuration or a rule, with their line numbers. */
function configsIn(text: string): { line: number; config: unknown }[] {
  const out: { line: number; config: unknown }[] = [];
  for (const match of text.matchAll(/^```json\n([\s\S]*?)^```/gm)) {
    let config: unknown;
    try {
      config = JSON.parse(match[1] ?? "");
    } catch {
      continue;
    }
    if (!config || typeof config !== "object") continue;
    const line = text.slice(0, match.index).split("\n").length;
    if (Array.isArray((config as { rules?: unknown }).rules)) out.push({ line, config });
    // A rule shown alone: as the only rule of a configuration.
    else if ("name" in config && "limit" in config) out.push({ line, config: { rules: [config] } });
  }
  return out;
}

describe("configurations shown in the guides", () => {
  const all = Object.entries(GUIDES).flatMap(([path, text]) =>
    configsIn(text).map((c) => ({ file: path.replace(/^(\.\.\/)+/, ""), ...c })),
  );

  it("finds them (the usage and LLM gateway guides have some)", () => {
    expect(all.some((c) => c.file === "docs/llm-gateway.md")).toBe(true);
    expect(all.some((c) => c.file === "docs/usage.md")).toBe(true);
  });

  for (const { file, line, config } of all) {
    it(`${file}:${line} is accepted`, () => {
      const parsed = parseConfig(config);
      expect(parsed.ok ? "ok" : JSON.stringify(parsed)).toBe("ok");
    });
  }
});
