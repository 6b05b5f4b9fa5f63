package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// embeddable are the folders whose packages (and their public
// subpackages) are imported by programs outside the module: their exported
// API may not name a type of an internal package, which such a program
// cannot import.
var embeddable = []string{"hub", "authdns", "edge", "client"}

// TestPublicAPINamesNoInternalType checks every exported function, method,
// type, field, variable and constant of the embeddable packages (tests
// excluded) for a type taken from an internal package.
func TestPublicAPINamesNoInternalType(t *testing.T) {
	root := filepath.Join("..", "..")
	checked := 0
	for _, top := range embeddable {
		dir := filepath.Join(root, top)
		if _, err := os.Stat(dir); err != nil {
			continue // not written yet
		}
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if d.Name() == "internal" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			rel, _ := filepath.Rel(root, path)
			for _, v := range internalInAPI(t, path) {
				t.Errorf("%s: %s", filepath.ToSlash(rel), v)
			}
			checked++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 4 {
		t.Fatalf("checked only %d package folders", checked)
	}
}

// TestExamplesImportNoInternal checks that the examples of the embeddable
// packages are programs an outsider could write: an example that needs an
// internal package shows an API the outsider does not have.
func TestExamplesImportNoInternal(t *testing.T) {
	root := filepath.Join("..", "..")
	found := 0
	for _, top := range embeddable {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return filepath.SkipDir
				}
				return err
			}
			if d.IsDir() && (d.Name() == "internal" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.Name() != "example_test.go" {
				return nil
			}
			found++
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); strings.Contains("/"+p+"/", "/internal/") {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s imports %s: an embedder cannot", filepath.ToSlash(rel), p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if found < 3 {
		t.Fatalf("found only %d example files", found)
	}
}

func TestInternalInAPIFindsEachPlace(t *testing.T) {
	dir := t.TempDir()
	src := `package p

import (
	"example.com/m/internal/admin"
	nu "example.com/m/internal/natsutil"
	"time"
)

type Config struct {
	Admin admin.Config
	nu.Config
	Timeout time.Duration
	hidden  admin.Config
}

type Options struct{ Conns []*nu.Conn }

type Alias = admin.Config

type Hook interface{ Call(admin.Config) }

func New(c Config, f func(map[string]nu.Conn)) (*admin.Server, error) { return nil, nil }

func (c *Config) Fine() time.Duration { return 0 }

func (c *Config) Leak() chan admin.Config { return nil }

func (c *hidden) Leak() admin.Config { return admin.Config{} }

type hidden struct{}

func helper(admin.Config) {}

var Default admin.Config
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := internalInAPI(t, dir)
	want := []string{
		"field Config.Admin: admin.Config",
		"field Config.Config: nu.Config",
		"field Options.Conns: nu.Conn",
		"func New: admin.Server",
		"func New: nu.Conn",
		"method Config.Leak: admin.Config",
		"method Hook.Call: admin.Config",
		"type Alias: admin.Config",
		"var Default: admin.Config",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// internalInAPI parses the non-test Go files of dir and lists, sorted, each
// exported declaration whose type names a type of an internal package.
func internalInAPI(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]bool{} // local names of internal imports
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains("/"+path+"/", "/internal/") {
				continue
			}
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			internal[name] = true
		}
		if len(internal) == 0 {
			continue
		}
		report := func(what string, expr ast.Node) {
			ast.Inspect(expr, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] {
						out = append(out, what+": "+id.Name+"."+sel.Sel.Name)
					}
					return false
				}
				return true
			})
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				what := "func " + d.Name.Name
				if d.Recv != nil {
					recv := receiverName(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					what = "method " + recv + "." + d.Name.Name
				}
				report(what, d.Type)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							typeAPI(s.Name.Name, s.Type, report)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && s.Type != nil {
								report("var "+n.Name, s.Type)
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// typeAPI reports the parts of type name that an importer sees: exported
// and embedded fields of a struct, methods of an interface, the whole
// definition otherwise.
func typeAPI(name string, expr ast.Expr, report func(string, ast.Node)) {
	switch x := expr.(type) {
	case *ast.StructType:
		for _, f := range x.Fields.List {
			if len(f.Names) == 0 { // embedded: its exported members are promoted
				report("field "+name+"."+receiverName(f.Type), f.Type)
				continue
			}
			for _, n := range f.Names {
				if n.IsExported() {
					report("field "+name+"."+n.Name, f.Type)
				}
			}
		}
	case *ast.InterfaceType:
		for _, m := range x.Methods.List {
			for _, n := range m.Names {
				if n.IsExported() {
					report("method "+name+"."+n.Name, m.Type)
				}
			}
			if len(m.Names) == 0 {
				report("type "+name, m.Type)
			}
		}
	default:
		report("type "+name, expr)
	}
}

// receiverName returns the type name of a receiver or embedded field
// expression (T, *T, pkg.T, T[P]).
func receiverName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverName(x.X)
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	case *ast.IndexExpr:
		return receiverName(x.X)
	case *ast.IndexListExpr:
		return receiverName(x.X)
	}
	return "?"
}

// TestDefaultsSpelling checks the one spelling of defaults in the public
// packages: a function DefaultConfig (or Default<Name>Config for a package
// with several configs) that returns a value, and a method WithDefaults
// that fills the zero fields; no function or method named Defaults, no
// default config handed out by pointer.
func TestDefaultsSpelling(t *testing.T) {
	root := filepath.Join("..", "..")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "internal", "testdata", "node_modules", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, v := range defaultsMisspelt(f) {
			t.Errorf("%s: %s", filepath.ToSlash(rel), v)
		}
		checked++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files", checked)
	}
}

func TestDefaultsMisspeltFindsEach(t *testing.T) {
	src := `package p

type Config struct{}

func Defaults() Config { return Config{} }

func DefaultConfig() *Config { return nil }

func DefaultPoolConfig() *Config { return nil }

func (c Config) Defaults() Config { return c }

func DefaultShedderConfig() Config { return Config{} }

func (c Config) WithDefaults() Config { return c }

func defaults() Config { return Config{} }
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(defaultsMisspelt(f), "\n")
	want := strings.Join([]string{
		"func Defaults: name it DefaultConfig",
		"func DefaultConfig returns a pointer: return the value",
		"func DefaultPoolConfig returns a pointer: return the value",
		"method Config.Defaults: name it WithDefaults",
	}, "\n")
	if got != want {
		t.Fatalf("found\n%s\nwant\n%s", got, want)
	}
}

// defaultsMisspelt lists the exported functions and methods of f that
// break the spelling of defaults.
func defaultsMisspelt(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || !fd.Name.IsExported() {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil {
			if name == "Defaults" {
				out = append(out, "method "+receiverName(fd.Recv.List[0].Type)+".Defaults: name it WithDefaults")
			}
			continue
		}
		switch {
		case name == "Defaults":
			out = append(out, "func Defaults: name it DefaultConfig")
		case strings.HasPrefix(name, "Default") && strings.HasSuffix(name, "Config"):
			if r := fd.Type.Results; r != nil && len(r.List) == 1 {
				if _, ptr := r.List[0].Type.(*ast.StarExpr); ptr {
					out = append(out, "func "+name+" returns a pointer: return the value")
				}
			}
		}
	}
	return out
}
