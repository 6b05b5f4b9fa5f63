package config

import (
	"encoding"
	"errors"
	"fmt"
	"iter"
	"math"
	"os"
	"reflect"
	"strconv"
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
		return errors.New("config: Decode needs a non-nil pointer to a struct")
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
		if err := yaml.NodeToValue(file.Docs[0].Body, dst, yaml.Strict(), yaml.CustomUnmarshaler(unmarshalDuration)); err != nil {
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

// Locate fills the file, line and column into the field errors of err
// (Errorf, Field) by the key paths of data, read as dst's type (a pointer
// to a struct, as for Decode): the check a caller adds after Decode names
// its lines as Decode's own do. Errors that are not field errors keep only
// the file name. A nil err stays nil.
func Locate(name string, data []byte, dst any, err error) error {
	if err == nil {
		return nil
	}
	idx := positions{}
	rt := reflect.TypeOf(dst)
	if file, perr := parser.ParseBytes(data, 0); perr == nil && rt != nil && rt.Kind() == reflect.Pointer && rt.Elem().Kind() == reflect.Struct {
		var ignored []error
		for _, doc := range file.Docs {
			if doc.Body != nil {
				idx.walk(doc.Body, rt.Elem(), "", &ignored)
			}
		}
	}
	return annotate(name, idx, err)
}

// locate turns a go-yaml error into one that names the file, the line and,
// where idx knows it, the key. walk has checked the keys and the kinds of
// values already, so these are mostly syntax errors; go-yaml's messages
// that name a Go type are rewritten in the words of the file.
func locate(name string, idx positions, err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil {
		p := ye.GetToken().Position
		msg := ye.GetMessage()
		var unknown *yaml.UnknownFieldError
		var typ *yaml.TypeError
		var over *yaml.OverflowError
		var node *yaml.UnexpectedNodeTypeError
		switch {
		case errors.As(err, &unknown):
			msg = fmt.Sprintf("unknown key %q", ye.GetToken().Value)
		case errors.As(err, &typ):
			msg = fmt.Sprintf("%q is not %s", ye.GetToken().Value, want(typ.DstType))
		case errors.As(err, &over):
			msg = fmt.Sprintf("%s is out of range (%s)", over.SrcNum, want(over.DstType))
		case errors.As(err, &node):
			msg = fmt.Sprintf("%s where %s is expected", nodeKindName(node.Actual), nodeKindName(node.Expected))
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

// walk records the position of every key below node and checks what
// go-yaml would report one at a time, or in words of Go, or not at all:
// unknown keys (every one, with the nearest known key), the kind of every
// value and its range, and durations. t is the Go type the node decodes
// into, or nil when unknown. Errors come in the order of the file.
func (p positions) walk(node ast.Node, t reflect.Type, path string, errs *[]error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && t.Kind() == reflect.Interface {
		t = nil
	}
	bad := func(format string, args ...any) {
		*errs = append(*errs, &FieldError{Path: path, Err: fmt.Errorf(format, args...)})
	}
	switch n := node.(type) {
	case *ast.AnchorNode:
		p.walk(n.Value, t, path, errs)
		return
	case *ast.TagNode:
		// corral configs have no use for YAML tags, and go-yaml mishandles
		// some of them (a bare "!x" where a list is expected panics), so
		// every tag is refused with its position.
		bad("YAML tag %q is not supported", n.Start.Value)
		return
	case nil, *ast.NullNode, *ast.AliasNode, *ast.CommentGroupNode:
		return
	}
	if t != nil && !customDecoded(t) {
		if msg := checkKind(node, t); msg != "" {
			bad("%s", msg)
			return
		}
	}
	switch n := node.(type) {
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
			f, ok := fieldByKey(t, key)
			if !ok {
				msg := fmt.Sprintf("unknown key %q", key)
				if s := suggest(key, keysOf(t)); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				*errs = append(*errs, &FieldError{Path: kp, Err: errors.New(msg)})
				return
			}
			vt = f.Type
		case reflect.Map:
			vt = t.Elem()
		}
	}
	p.walk(mv.Value, vt, kp, errs)
}

// customDecoded reports whether values of t decode through their own
// method (ValueConfig, say, takes a bare string or a mapping), so that
// walk does not judge their kind. A struct among them still has its keys
// checked.
func customDecoded(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	for _, it := range unmarshalers {
		if pt.Implements(it) {
			return true
		}
	}
	return false
}

var unmarshalers = []reflect.Type{
	reflect.TypeFor[yaml.InterfaceUnmarshaler](),
	reflect.TypeFor[yaml.InterfaceUnmarshalerContext](),
	reflect.TypeFor[yaml.BytesUnmarshaler](),
	reflect.TypeFor[yaml.BytesUnmarshalerContext](),
	reflect.TypeFor[yaml.NodeUnmarshaler](),
	reflect.TypeFor[yaml.NodeUnmarshalerContext](),
	reflect.TypeFor[encoding.TextUnmarshaler](),
}

// checkKind returns what is wrong with node as a value of type t, in the
// words of the file, or "".
func checkKind(node ast.Node, t reflect.Type) string {
	got := nodeKind(node)
	if t == durationType {
		switch n := node.(type) {
		case *ast.StringNode:
			if _, err := ParseDuration(n.Value); err != nil {
				return err.Error()
			}
			return ""
		case *ast.IntegerNode, *ast.FloatNode:
			f, _ := strconv.ParseFloat(n.GetToken().Value, 64)
			if _, err := secondsDuration(f, n.GetToken().Value); err != nil {
				return err.Error()
			}
			return ""
		}
		return fmt.Sprintf("%s is not a duration (%s)", got, durationHint)
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := node.(*ast.IntegerNode)
		if !ok {
			return fmt.Sprintf("%s is not %s", got, want(t))
		}
		var v int64
		switch x := n.Value.(type) {
		case int64:
			v = x
		case uint64:
			if x > math.MaxInt64 {
				return fmt.Sprintf("%s is out of range (%s)", n.GetToken().Value, want(t))
			}
			v = int64(x)
		}
		if reflect.Zero(t).OverflowInt(v) {
			return fmt.Sprintf("%s is out of range (%s)", n.GetToken().Value, want(t))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := node.(*ast.IntegerNode)
		if !ok {
			return fmt.Sprintf("%s is not %s", got, want(t))
		}
		var u uint64
		switch v := n.Value.(type) {
		case int64:
			if v < 0 {
				return fmt.Sprintf("%s is out of range (%s)", n.GetToken().Value, want(t))
			}
			u = uint64(v)
		case uint64:
			u = v
		}
		if reflect.Zero(t).OverflowUint(u) {
			return fmt.Sprintf("%s is out of range (%s)", n.GetToken().Value, want(t))
		}
	case reflect.Float32, reflect.Float64:
		switch node.(type) {
		case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		default:
			return fmt.Sprintf("%s is not %s", got, want(t))
		}
	case reflect.Bool:
		if _, ok := node.(*ast.BoolNode); !ok {
			return fmt.Sprintf("%s is not %s", got, want(t))
		}
	case reflect.String:
		switch node.(type) {
		case *ast.MappingNode, *ast.MappingValueNode, *ast.SequenceNode:
			return fmt.Sprintf("%s is not %s", got, want(t))
		}
	case reflect.Slice, reflect.Array:
		if _, ok := node.(*ast.SequenceNode); !ok {
			return fmt.Sprintf("%s is not %s", got, want(t))
		}
	case reflect.Map, reflect.Struct:
		switch node.(type) {
		case *ast.MappingNode, *ast.MappingValueNode:
		default:
			return fmt.Sprintf("%s is not %s", got, want(t))
		}
	}
	return ""
}

// want says what a value of t is, in the words of the file: "an integer
// from 0 to 255", "a list".
func want(t reflect.Type) string {
	if t == nil {
		return "a value of another kind"
	}
	if t == durationType {
		return "a duration (" + durationHint + ")"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Int8, reflect.Int16, reflect.Int32:
		bits := t.Bits()
		return fmt.Sprintf("a whole number from %d to %d", -(int64(1) << (bits - 1)), int64(1)<<(bits-1)-1)
	case reflect.Uint, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return fmt.Sprintf("a whole number from 0 to %d", uint64(1)<<t.Bits()-1)
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping of keys to values"
	}
	return "a value of another kind"
}

// nodeKind describes node as the file shows it: a quoted scalar, or the
// kind of a collection.
func nodeKind(node ast.Node) string {
	switch n := node.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.LiteralNode:
		return "a block of text"
	case ast.ScalarNode:
		if tok := n.GetToken(); tok != nil {
			return strconv.Quote(tok.Value)
		}
	}
	return "this value"
}

// nodeKindName names a YAML node type in the words of the file.
func nodeKindName(t ast.NodeType) string {
	switch t {
	case ast.MappingType, ast.MappingValueType:
		return "a mapping"
	case ast.SequenceType:
		return "a list"
	case ast.StringType, ast.LiteralType:
		return "a string"
	case ast.IntegerType:
		return "a whole number"
	case ast.FloatType:
		return "a number"
	case ast.BoolType:
		return "true or false"
	case ast.NullType:
		return "nothing"
	}
	return "another kind of value"
}

// yamlFields yields the key and field of every YAML key a struct decodes
// from, following inline fields, in declaration order.
func yamlFields(t reflect.Type) iter.Seq2[string, reflect.StructField] {
	return func(yield func(string, reflect.StructField) bool) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts := yamlName(f)
			if name == "-" {
				continue
			}
			if !strings.Contains(opts, "inline") {
				if !yield(name, f) {
					return
				}
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() != reflect.Struct {
				continue
			}
			for k, g := range yamlFields(ft) {
				if !yield(k, g) {
					return
				}
			}
		}
	}
}

// keysOf lists the keys a struct decodes from, following inline fields,
// in declaration order.
func keysOf(t reflect.Type) []string {
	var keys []string
	for k := range yamlFields(t) {
		keys = append(keys, k)
	}
	return keys
}

// fieldByKey finds the struct field decoded from YAML key, following
// inline fields.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for k, f := range yamlFields(t) {
		if k == key {
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
