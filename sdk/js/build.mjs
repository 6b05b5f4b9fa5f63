// build.mjs: `npm run build`. Bundles src/ with esbuild into
//   dist/corral.js          ES module (import { Client } from "@corralhq/corral")
//   dist/corral.browser.js  minified IIFE for a <script> tag: window.Corral.Client
// and writes the type declarations (dist/*.d.ts) with tsc, unless given
// --no-types (the end-to-end tests need only the bundle).
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";

rmSync("dist", { recursive: true, force: true });
const common = { entryPoints: ["src/index.ts"], bundle: true, target: "es2020", sourcemap: true, logLevel: "warning" };
await build({ ...common, format: "esm", outfile: "dist/corral.js" });
await build({ ...common, format: "iife", globalName: "Corral", minify: true, outfile: "dist/corral.browser.js" });
if (!process.argv.includes("--no-types")) {
  execFileSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "."], { stdio: "inherit" });
}
