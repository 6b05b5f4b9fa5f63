// driver.mjs: one headless Chromium (Debian's, driven by playwright-core)
// for the Go tests that use package internal/browser. It reads commands on
// its standard input,
//   open ID URL          open URL in a new page called ID
//   close ID             close that page
//   eval ID N JSON       evaluate the JavaScript expression JSON (a JSON
//                        string) in page ID; reply N
//   shot ID N JSON       write a full-page PNG screenshot of page ID to the
//                        path JSON (a JSON string); reply N
// prints every console message of a page as a line "ID text" (newlines
// escaped as \n; console.error messages as "ID CONSOLEERROR text", uncaught
// errors as "ID PAGEERROR text"), each reply as "DRIVER reply N {json}"
// ({"value": ...} or {"error": "..."}), and closes the browser when its
// input ends. playwright-core is the one installed in sdk/js/node_modules
// (CORRAL_NODE_MODULES names that folder's parent).
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const require = createRequire(join(process.env.CORRAL_NODE_MODULES || process.cwd(), "package.json"));
const { chromium } = require("playwright-core");

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
const reply = (n, doc) => {
  let text;
  try {
    text = JSON.stringify(doc);
  } catch (e) {
    text = JSON.stringify({ error: "reply not JSON: " + e.message });
  }
  out("DRIVER", `reply ${n} ${text === undefined ? "{}" : text}`);
};

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
  const parts = l.split(" ");
  const [cmd, id] = parts;
  try {
    if (cmd === "open") {
      const page = await ctx.newPage();
      pages.set(id, page);
      page.on("console", (m) => out(id, (m.type() === "error" ? "CONSOLEERROR " : "") + m.text()));
      page.on("pageerror", (e) => out(id, "PAGEERROR " + e.message));
      await page.goto(parts[2]);
      out(id, "DRIVER loaded");
    } else if (cmd === "close") {
      await pages.get(id)?.close();
      pages.delete(id);
    } else if (cmd === "eval" || cmd === "shot") {
      const n = parts[2];
      const arg = JSON.parse(parts.slice(3).join(" "));
      const page = pages.get(id);
      if (!page) {
        reply(n, { error: `no page ${id}` });
        return;
      }
      try {
        if (cmd === "eval") {
          reply(n, { value: await page.evaluate(arg) });
        } else {
          await page.screenshot({ path: arg, fullPage: true });
          reply(n, { value: arg });
        }
      } catch (e) {
        reply(n, { error: e.message });
      }
    }
  } catch (e) {
    out(id, "PAGEERROR driver: " + e.message);
  }
});
lines.on("close", () => finish(0));
out("DRIVER", "ready");
