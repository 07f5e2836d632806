// Runs the compiled scratch app (out/app.js) in Deno, served by Deno.serve, against the store
// named on the command line. Prints what came back as one JSON line.
//   deno run --allow-net --allow-env --allow-read run-deno.mjs <store url> <store token> <prefix>
import { createApp } from "./out/app.js";
import { fourEach } from "./serve-check.mjs";

// @ts-expect-error: Deno's global
const [url = "", token = "", prefix = ""] = Deno.args;
const app = createApp({ url, token, prefix });
// @ts-expect-error: Deno's global
const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen() {} }, app.fetch);
const result = await fourEach(`http://127.0.0.1:${server.addr.port}`);
await server.shutdown();
// @ts-expect-error: Deno's global
console.log(JSON.stringify({ runtime: `deno ${Deno.version.deno}`, ...result }));
