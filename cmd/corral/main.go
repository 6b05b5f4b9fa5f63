// Command corral is the one binary of the corral fabric: the servers
// (dns, hub, edge), the tools (shard, kraken, sim) and the local fabric
// (up). Each subcommand lives in a file of its own; commands.go lists them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
