// Package scenarios holds the scenario files shipped with corral (the
// *.yaml files of this folder), embedded so that `corral sim` lists and
// runs them from any folder, installed binaries included. The format is
// package scenario's.
package scenarios

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed *.yaml
var files embed.FS

// Names returns the shipped scenarios' names (file names without .yaml),
// sorted.
func Names() []string {
	entries, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && !e.IsDir() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// File returns the shipped scenario called name ("cdn", also
// accepted as "cdn.yaml" or "scenarios/cdn.yaml"), and
// whether there is one.
func File(name string) ([]byte, bool) {
	name = strings.TrimSuffix(path.Base(name), ".yaml")
	data, err := files.ReadFile(name + ".yaml")
	return data, err == nil
}
