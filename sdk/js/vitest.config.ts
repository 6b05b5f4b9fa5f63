import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The machine is shared: one worker is enough for these tests.
    pool: "threads",
    maxWorkers: 1,
    testTimeout: 10000,
  },
});
