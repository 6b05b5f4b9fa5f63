package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/report"
)

// version is set at link time with -ldflags "-X main.version=v1.2.3"; when
// it is not, the module version from the build information is used.
var version = ""

// versionInfo is what `corral version --json` prints.
type versionInfo struct {
	// Version is the corral release, or "(devel)" for a source build.
	Version string `json:"version"`
	// Go is the Go toolchain the binary was built with.
	Go string `json:"go"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

func currentVersion() versionInfo {
	v := version
	if v == "" {
		v = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
	}
	return versionInfo{Version: v, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

func newVersionCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the corral version and the Go version it was built with",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := currentVersion()
			if asJSON {
				return report.JSON(g.stdout, v)
			}
			_, err := fmt.Fprintf(g.stdout, "corral %s %s %s\n", v.Version, v.Go, v.Platform)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON: {version, go, platform}")
	return cmd
}
