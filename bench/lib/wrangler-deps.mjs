// @ts-check
// Where the benchmark loads Miniflare, workerd and their dependencies from: the copies wrangler
// itself uses, the runtime `wrangler dev` and the deploy target are built for. A top-level
// `miniflare` may be another major (vitest's pool).
import { createRequire } from "node:module";

/** `require` as seen from wrangler's package. */
const fromWrangler = createRequire(createRequire(import.meta.url).resolve("wrangler/package.json"));

/** `require` as seen from that Miniflare's package (its workerd, its `ws`). */
export const fromMiniflare = createRequire(fromWrangler.resolve("miniflare/package.json"));
