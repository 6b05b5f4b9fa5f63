package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/logging"
)

// commands is the registry of subcommands, in the order --help lists them.
// A subcommand is added here only once it does real work.
func commands() []func(*globals) *cobra.Command {
	return []func(*globals) *cobra.Command{
		newVersionCmd,
		newUpCmd,
		newSimCmd,
		newKrakenCmd,
		newDNSCmd,
		newHubCmd,
		newEdgeCmd,
		newShardCmd,
		newTokenCmd,
		newSubCmd,
		newPubCmd,
		newDoctorCmd,
	}
}

// globals holds what every subcommand shares: the output streams and the
// persistent flags of the root command.
type globals struct {
	stdout, stderr io.Writer
	logLevel       string
	logFormat      string
}

// logger builds the process logger from the --log-level and --log-format
// flags; logs go to stderr so that stdout carries only results.
func (g *globals) logger() (*slog.Logger, error) {
	return logging.New(g.stderr, g.logLevel, logging.Format(g.logFormat))
}

// exitError carries a process exit code other than 1 through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "corral",
		Short: "corral keeps fleets of persistent connections alive through thundering herds",
		Long: `corral keeps fleets of persistent connections (WebSocket and gRPC streams)
alive through thundering herds: surges, region loss, mass reconnects.

Every server subcommand takes --config FILE, --listen ADDR and --admin ADDR,
and has a "validate" subcommand that checks a config without starting.
Commands that report results print them as JSON with --json.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "auto", "log format: auto (text on a terminal, JSON otherwise), text or json")
	for _, mk := range commands() {
		root.AddCommand(mk(g))
	}
	return root
}

// run executes the command line args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: stderr}
	root := newRootCmd(g)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "corral:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}
