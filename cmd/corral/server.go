package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/admin"
	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/lifecycle"
)

// serverSpec describes a server subcommand (dns, hub, edge). Every server
// subcommand has the same flags and a validate subcommand; newServerCmd
// builds both from the spec.
type serverSpec[C any] struct {
	name  string // subcommand name, e.g. "dns"
	short string // one line for --help
	long  string
	// example is the shipped example config, named in --help.
	example string
	// envPrefix enables CORRAL_<PART>_<KEY> overrides, e.g. "CORRAL_DNS".
	envPrefix string
	// defaults returns a config holding the defaults the file overrides.
	defaults func() *C
	// load, when set, reads a config file in place of config.Load over
	// defaults (authdns.LoadConfig also remembers what the file held, for
	// its reload watcher).
	load func(path string) (*C, error)
	// addrs returns pointers to the listen and admin addresses of cfg, which
	// --listen and --admin override.
	addrs func(cfg *C) (listen, admin *string)
	// run serves until ctx ends. path is the config file ("" for none), for
	// servers that reload it.
	run func(ctx context.Context, log *slog.Logger, cfg *C, path string) error
}

// serveWithAdmin runs a server part and its admin listener until ctx ends,
// then shuts the server down (its drain) and only after that the admin
// listener: /readyz answers 503 from the first moment of the shutdown and
// /metrics answers until the server has stopped. grace bounds the whole
// shutdown. Every server subcommand runs through it.
func serveWithAdmin(ctx context.Context, log *slog.Logger, grace time.Duration, adm *admin.Server, server lifecycle.Named, others ...lifecycle.Named) error {
	parts := append([]lifecycle.Named{{Name: "admin", Part: adm}, server}, others...)
	return lifecycle.Run(ctx, log, grace, parts...)
}

// loadServerConfig reads path (or only the defaults when path is empty),
// applies environment and flag overrides, and validates.
func loadServerConfig[C any](s serverSpec[C], path, listen, admin string) (*C, error) {
	cfg := s.defaults()
	opts := config.Options{EnvPrefix: s.envPrefix}
	var err error
	switch {
	case path != "" && s.load != nil:
		cfg, err = s.load(path)
	case path != "":
		err = config.Load(path, cfg, opts)
	default:
		err = config.Decode("built-in defaults", nil, cfg, opts)
		if err != nil {
			// The defaults alone are not enough (corral dns has no zones):
			// say where a complete config is.
			err = fmt.Errorf("%w\nno --config was given, so only the built-in defaults were read; %s is a complete example: corral %s --config %s", err, s.example, s.name, s.example)
		}
	}
	if err != nil {
		return nil, err
	}
	if s.addrs == nil || (listen == "" && admin == "") {
		return cfg, nil
	}
	l, a := s.addrs(cfg)
	if listen != "" {
		*l = listen
	}
	if admin != "" {
		*a = admin
	}
	if v, ok := any(cfg).(config.Validator); ok {
		if err := v.Validate(); err != nil {
			src := "flags"
			if path != "" {
				src = path + " with flags"
			}
			return nil, fmt.Errorf("config: %s: %w", src, err)
		}
	}
	return cfg, nil
}

func newServerCmd[C any](g *globals, s serverSpec[C]) *cobra.Command {
	var path, listen, admin string
	cmd := &cobra.Command{
		Use:   s.name + " [--config FILE]",
		Short: s.short,
		Long:  s.long + "\n\nExample config: " + s.example,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			cfg, err := loadServerConfig(s, path, listen, admin)
			if err != nil {
				return err
			}
			return s.run(cmd.Context(), log.With("part", s.name), cfg, path)
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "YAML config file (default: built-in defaults on loopback)")
	cmd.Flags().StringVar(&listen, "listen", "", "override the config's listen address")
	cmd.Flags().StringVar(&admin, "admin", "", "override the config's admin address (metrics, healthz, readyz, pprof)")

	var vpath string
	validate := &cobra.Command{
		Use:   "validate --config FILE",
		Short: "Check a " + s.name + " config without starting",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if _, err := loadServerConfig(s, vpath, "", ""); err != nil {
				return err
			}
			_, err := fmt.Fprintf(g.stdout, "%s: ok\n", vpath)
			return err
		},
	}
	validate.Flags().StringVar(&vpath, "config", "", "YAML config file to check")
	_ = validate.MarkFlagRequired("config")
	cmd.AddCommand(validate)
	return cmd
}
