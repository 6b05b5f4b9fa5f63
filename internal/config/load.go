package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Validator is implemented by configuration types that check their values.
// Validate reports bad values with Errorf or Field so that Load can name the
// line of the key.
type Validator interface {
	Validate() error
}

// Options tune Load and Decode. The zero value reads no environment.
type Options struct {
	// EnvPrefix enables overrides from the environment: a variable named
	// EnvPrefix + "_" + the upper-cased key path ("CORRAL_DNS_LISTEN" for
	// the key listen with prefix "CORRAL_DNS") replaces a single scalar
	// value. Empty disables overrides.
	EnvPrefix string
	// Environ is the environment to read, as os.Environ returns it; nil
	// means os.Environ().
	Environ []string
}

// Load reads the YAML file at path into dst (a pointer to a struct holding
// defaults), applies environment overrides and validates the result. Every
// error names the file, and where it can, the line and the key.
func Load(path string, dst any, opts Options) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return Decode(path, data, dst, opts)
}

// Decode is Load on bytes already read; name is used in messages. It never
// panics on input: a panic inside the YAML library is returned as an error.
func Decode(name string, data []byte, dst any, opts Options) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("config: %s: the YAML library failed on this input: %v", name, r)
		}
	}()
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("config: Decode needs a non-nil pointer to a struct, got %T", dst)
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return locate(name, nil, err)
	}
	idx := positions{}
	var errs []error
	for _, doc := range file.Docs {
		if doc.Body == nil {
			continue
		}
		idx.walk(doc.Body, rv.Elem().Type(), "", &errs)
	}
	if len(errs) > 0 {
		return annotate(name, idx, errors.Join(errs...))
	}
	if len(file.Docs) > 1 {
		return fmt.Errorf("config: %s: holds %d YAML documents, want one", name, len(file.Docs))
	}
	if len(file.Docs) == 1 && file.Docs[0].Body != nil {
		if err := yaml.NodeToValue(file.Docs[0].Body, dst, yaml.Strict()); err != nil {
			return locate(name, idx, err)
		}
	}
	if opts.EnvPrefix != "" {
		env := opts.Environ
		if env == nil {
			env = os.Environ()
		}
		if err := applyEnv(opts.EnvPrefix, rv.Elem(), env); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	if v, ok := dst.(Validator); ok {
		if err := v.Validate(); err != nil {
			return annotate(name, idx, err)
		}
	}
	return nil
}

// locate turns a go-yaml error into one that names the file, the line and,
// where idx knows it, the key.
func locate(name string, idx positions, err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		p := ye.GetToken().Position
		msg := ye.GetMessage()
		var unknown *yaml.UnknownFieldError
		var typ *yaml.TypeError
		switch {
		case errors.As(err, &unknown):
			msg = fmt.Sprintf("unknown key %q", ye.GetToken().Value)
		case errors.As(err, &typ):
			msg = fmt.Sprintf("%q is not a valid %s", ye.GetToken().Value, typ.DstType)
		}
		if key := idx.keyOn(p.Line, p.Column); key != "" {
			msg = key + ": " + msg
		}
		return fmt.Errorf("config: %s:%d:%d: %s", name, p.Line, p.Column, msg)
	}
	return fmt.Errorf("config: %s: %w", name, err)
}

// annotate fills file positions into the field errors in err.
func annotate(name string, idx positions, err error) error {
	var out []error
	for _, e := range flatten(err) {
		var fe *FieldError
		if !errors.As(e, &fe) {
			out = append(out, fmt.Errorf("%s: %w", name, e))
			continue
		}
		c := *fe
		c.File = name
		if p, ok := idx.lookup(fe.Path); ok {
			c.Line, c.Column = p.Line, p.Column
		}
		out = append(out, &c)
	}
	return fmt.Errorf("config: %w", errors.Join(out...))
}

// positions maps key paths ("a.b[2].c") to where their key stands.
type positions map[string]token.Position

// lookup finds the position of path, or of its nearest ancestor present in
// the file (a missing required key is reported at its parent).
func (p positions) lookup(path string) (token.Position, bool) {
	for {
		if pos, ok := p[path]; ok {
			return pos, true
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return token.Position{}, false
		}
		path = path[:i]
	}
}

// keyOn returns the path of the last key that stands on line before
// column, or "".
func (p positions) keyOn(line, column int) string {
	best, bestCol := "", 0
	for path, pos := range p {
		if pos.Line == line && pos.Column < column && pos.Column >= bestCol && !strings.HasSuffix(path, "]") {
			best, bestCol = path, pos.Column
		}
	}
	return best
}

var durationType = reflect.TypeFor[time.Duration]()

// walk records the position of every key below node and checks the values
// go-yaml cannot place itself (durations). t is the Go type the node
// decodes into, or nil when unknown.
func (p positions) walk(node ast.Node, t reflect.Type, path string, errs *[]error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n := node.(type) {
	case *ast.AnchorNode:
		p.walk(n.Value, t, path, errs)
	case *ast.TagNode:
		// corral configs have no use for YAML tags, and go-yaml mishandles
		// some of them (a bare "!x" where a list is expected panics), so
		// every tag is refused with its position.
		*errs = append(*errs, &FieldError{Path: path, Err: fmt.Errorf("YAML tag %q is not supported", n.Start.Value)})
	case *ast.MappingNode:
		for _, mv := range n.Values {
			p.walkPair(mv, t, path, errs)
		}
	case *ast.MappingValueNode:
		p.walkPair(n, t, path, errs)
	case *ast.SequenceNode:
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for i, v := range n.Values {
			ip := fmt.Sprintf("%s[%d]", path, i)
			if _, ok := p[ip]; !ok && v != nil && v.GetToken() != nil {
				p[ip] = *v.GetToken().Position
			}
			p.walk(v, et, ip, errs)
		}
	case *ast.StringNode:
		if t == durationType {
			if _, err := time.ParseDuration(n.Value); err != nil {
				*errs = append(*errs, &FieldError{Path: path, Err: fmt.Errorf("bad duration %q (want a number with a unit, like 500ms, 10s or 1m)", n.Value)})
			}
		}
	}
}

func (p positions) walkPair(mv *ast.MappingValueNode, t reflect.Type, path string, errs *[]error) {
	key := mv.Key.String()
	if tok := mv.Key.GetToken(); tok != nil {
		key = tok.Value
	}
	kp := joinPath(path, key)
	if tok := mv.Key.GetToken(); tok != nil {
		p[kp] = *tok.Position
	}
	var vt reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			if f, ok := fieldByKey(t, key); ok {
				vt = f.Type
			}
		case reflect.Map:
			vt = t.Elem()
		}
	}
	p.walk(mv.Value, vt, kp, errs)
}

// fieldByKey finds the struct field decoded from YAML key, following
// inline fields.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts := yamlName(f)
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if g, ok := fieldByKey(ft, key); ok {
					return g, true
				}
			}
			continue
		}
		if name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// yamlName returns the key a field decodes from and the tag's options.
func yamlName(f reflect.StructField) (name, opts string) {
	tag := f.Tag.Get("yaml")
	name, opts, _ = strings.Cut(tag, ",")
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, opts
}
