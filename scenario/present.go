package scenario

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// keysSet returns the dotted key path of every key the file sets to a
// value ("dns.ttl", "origins[0].weight"), in the spelling of the field
// errors. A key whose value is null (`ttl:` or `ttl: ~`) counts as
// absent. A file that does not parse gives an empty set (the decoder
// reports the syntax error).
func keysSet(data []byte) map[string]bool {
	set := map[string]bool{}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return set
	}
	for _, doc := range file.Docs {
		if doc.Body != nil {
			walkKeys(doc.Body, "", set)
		}
	}
	return set
}

func walkKeys(n ast.Node, path string, set map[string]bool) {
	switch v := n.(type) {
	case *ast.MappingNode:
		for _, mv := range v.Values {
			walkKeys(mv, path, set)
		}
	case *ast.MappingValueNode:
		tok := v.Key.GetToken()
		if tok == nil {
			return
		}
		p := tok.Value
		if path != "" {
			p = path + "." + tok.Value
		}
		if v.Value == nil || v.Value.Type() == ast.NullType {
			return
		}
		set[p] = true
		walkKeys(v.Value, p, set)
	case *ast.SequenceNode:
		for i, e := range v.Values {
			walkKeys(e, fmt.Sprintf("%s[%d]", path, i), set)
		}
	case *ast.TagNode:
		walkKeys(v.Value, path, set)
	case *ast.AnchorNode:
		walkKeys(v.Value, path, set)
	}
}

// has reports whether the file s was read from sets the key at path. A
// Scenario built in code sets none: its zero fields take their defaults.
func (s *Scenario) has(path string) bool { return s.set[path] }

// orDefault sets *v to def when it is zero and the key at path is absent:
// an explicit value, zero included, is kept as given (Validate refuses the
// zeros that are not usable).
func orDefault[T comparable](s *Scenario, path string, v *T, def T) {
	var zero T
	if *v == zero && !s.has(path) {
		*v = def
	}
}

// explicitZeroBackoff refuses a client.backoff key the file sets to zero
// where the backoff package would put its default instead: the value would
// not be used as given.
func (s *Scenario) explicitZeroBackoff(bad func(string, string, ...any)) {
	c := s.Client.Backoff
	full, err := c.WithDefaults()
	if err != nil {
		return // Validate reports the bad configuration
	}
	have, got := reflect.ValueOf(c), reflect.ValueOf(full)
	t := have.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		path := "client.backoff." + name
		if !s.has(path) || !have.Field(i).IsZero() || got.Field(i).IsZero() {
			continue
		}
		def := got.Field(i).Interface()
		if d, ok := def.(time.Duration); ok {
			def = d.String()
		}
		zero := "0"
		if t.Field(i).Type.Kind() == reflect.String {
			zero = `""`
		}
		bad(path, "%s would not be used as given: the backoff package takes %v for policy %s; set another value or remove the key for that default", zero, def, full.Policy)
	}
}
