// driver.mjs: opens one page in headless Chromium (Debian's, driven by
// playwright-core) and prints what the page logs, a line per console
// message, until its standard input closes. The Go tests of this folder run
// it: node driver.mjs URL
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const url = process.argv[2];
if (!url) {
  console.error("usage: node driver.mjs URL");
  process.exit(2);
}
const profile = mkdtempSync(join(tmpdir(), "corral-chromium-"));
// Without the networking flags Chromium reaches for the network at start,
// which a closed machine answers slowly or not at all.
const args = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CORRAL_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args,
  timeout: 60000,
});
let done = false;
const finish = async (code) => {
  if (done) return;
  done = true;
  await ctx.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
  process.exit(code);
};
// A test that dies leaves no browser behind.
const limit = setTimeout(() => {
  console.log("DRIVER time limit reached");
  finish(3);
}, Number(process.env.CORRAL_E2E_LIMIT_MS || 180000));
limit.unref();
process.stdin.on("end", () => finish(0));
process.stdin.resume();

const page = ctx.pages()[0] ?? (await ctx.newPage());
page.on("console", (m) => console.log(m.text()));
page.on("pageerror", (e) => console.log("PAGEERROR " + e.message));
await page.goto(url);
console.log("DRIVER loaded " + url);
