// Package e2e is the Go side of the browser SDK's tests (sdk/js). It holds
// no code of its own, only tests:
//
//   - TestReference writes, and checks against the Go code, the reference
//     tables the SDK's unit tests compare with (test/reference): package
//     backoff's delays for a grid of attempts, previous delays, uniform draws
//     and hints (with retry windows), the frames package wire encodes and
//     the close reasons wire.ParseReason reads, so the TypeScript backoff,
//     codec and parseReason are checked against the Go ones without running
//     Go in Vitest. Regenerate with `go test ./sdk/js/e2e -run TestReference -update`.
//   - TestBrowserResumesAcrossDrain builds the corral binary, runs two
//     `corral hub` processes on one NATS server, and drives headless Chromium
//     (playwright-core, driver.mjs) through a page that uses the built SDK:
//     subscribe, receive, the first hub drains on SIGTERM, the page resumes
//     on the second hub and receives every message published meanwhile, each
//     once. TestReadmeExample runs the README's copy-paste example in the
//     same browser against a live hub.
//
// The browser tests need Node.js, the SDK's node_modules (npm ci in sdk/js)
// and /usr/bin/chromium: scripts/test.sh installs them. Without them the
// tests fail and say what is missing (with -short they are skipped).
package e2e
