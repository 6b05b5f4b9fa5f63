// driver.mjs: one headless Chromium (Debian's, driven by playwright-core)
// for the Go tests of this folder. It reads commands on its standard input,
//   open ID URL    open URL in a new page called ID
//   close ID       close that page
// prints every console message of a page as a line "ID text" (newlines
// escaped as \n), and closes the browser when its input ends.
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

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
  timeout: 90000,
});
const out = (id, text) => process.stdout.write(`${id} ${String(text).replace(/\n/g, "\\n")}\n`);

let done = false;
const finish = async (code) => {
  if (done) return;
  done = true;
  await ctx.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
  process.exit(code);
};
// A test process that dies leaves no browser behind.
setTimeout(() => {
  out("DRIVER", "time limit reached");
  finish(3);
}, Number(process.env.CORRAL_E2E_LIMIT_MS || 600000)).unref();

const pages = new Map();
const lines = createInterface({ input: process.stdin });
lines.on("line", async (l) => {
  const [cmd, id, url] = l.split(" ");
  try {
    if (cmd === "open") {
      const page = await ctx.newPage();
      pages.set(id, page);
      page.on("console", (m) => out(id, m.text()));
      page.on("pageerror", (e) => out(id, "PAGEERROR " + e.message));
      await page.goto(url);
      out(id, "DRIVER loaded");
    } else if (cmd === "close") {
      await pages.get(id)?.close();
      pages.delete(id);
    }
  } catch (e) {
    out(id, "PAGEERROR driver: " + e.message);
  }
});
lines.on("close", () => finish(0));
out("DRIVER", "ready");
