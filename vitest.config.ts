import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Real sockets and real child processes: run files in parallel forks, tests in order.
    pool: "forks",
    fileParallelism: true,
  },
});
