package scenario

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// zeroBase is a valid scenario as a tree; listElems gives a valid element
// of every list of structs the format has, so that the keys of its
// elements can be set too.
func zeroBase() map[string]any {
	return map[string]any{
		"duration":   "10s",
		"population": map[string]any{"devices": 1000},
		"dns":        map[string]any{"policy": "multivalue"},
		"origins":    []any{map[string]any{"name": "lb", "region": "r1", "max_connections": 2000, "max_new_per_second": 100}, map[string]any{"name": "lb2", "region": "r2", "max_connections": 2000, "max_new_per_second": 100}},
	}
}

var listElems = map[string]map[string]any{
	"population.priorities": {"name": "P0", "share": 1},
	"origins":               {"name": "lb", "region": "r1", "max_connections": 2000, "max_new_per_second": 100},
	"traffic.arrivals":      {"at": "1s", "over": "1s", "devices": 100},
	"traffic.disconnects":   {"at": "1s", "share": 0.5},
	"traffic.region_loss":   {"at": "1s", "region": "r1"},
	"traffic.poison":        {"at": "1s", "tenant": 0},
	"traffic.publish":       {"at": "1s", "for": "1s", "priority": "P0", "per_second": 1},
	"traffic.mass_close":    {"at": "1s", "origins": 1},
	"traffic.kill":          {"at": "1s", "origins": 1, "signal": "stop", "for": "1s"},
	"traffic.unhealthy":     {"at": "1s", "origins": 1, "for": "1s"},
	"traffic.move":          {"at": "1s", "from": "r1", "to": "r2"},
}

// leafKey is one key of the format that holds a value, not a section.
type leafKey struct {
	path string   // "origins[0].weight"
	keys []string // "origins", "[0]", "weight"
	typ  reflect.Type
}

// leafKeys walks every key the format accepts, by the yaml tags of t.
func leafKeys(t reflect.Type, path string, keys []string, out *[]leafKey) {
	durType := reflect.TypeFor[time.Duration]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		p := name
		if path != "" {
			p = path + "." + name
		}
		ks := append(append([]string(nil), keys...), name)
		ft := f.Type
		switch {
		case ft == durType:
			*out = append(*out, leafKey{p, ks, ft})
		case ft.Kind() == reflect.Struct:
			leafKeys(ft, p, ks, out)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			*out = append(*out, leafKey{p, ks, ft}) // the empty list itself
			leafKeys(ft.Elem(), p+"[0]", append(ks, "[0]"), out)
		default:
			*out = append(*out, leafKey{p, ks, ft})
		}
	}
}

// zeroYAML is the explicit zero of a key of type t as a file writes it.
func zeroYAML(t reflect.Type) any {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "0s"
	case t.Kind() == reflect.Slice:
		return []any{}
	case t.Kind() == reflect.String:
		return ""
	case t.Kind() == reflect.Bool:
		return false
	default:
		return 0
	}
}

// setPath sets the key at keys in tree to v, creating the sections and
// the list element (a copy of listElems') on the way; list is the dotted
// path of the section tree stands for.
func setPath(tree map[string]any, keys []string, v any, list string) {
	k := keys[0]
	path := k
	if list != "" {
		path = list + "." + k
	}
	switch {
	case len(keys) == 1:
		tree[k] = v
	case keys[1] == "[0]":
		elem := map[string]any{}
		for ek, ev := range listElems[path] {
			elem[ek] = ev
		}
		tree[k] = []any{elem}
		if len(keys) > 2 {
			setPath(elem, keys[2:], v, path)
		}
	default:
		next, ok := tree[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			tree[k] = next
		}
		setPath(next, keys[1:], v, path)
	}
}

// valueAt reads the field at keys of s.
func valueAt(s *Scenario, keys []string) (reflect.Value, bool) {
	v := reflect.ValueOf(s).Elem()
	for _, k := range keys {
		if k == "[0]" {
			if v.Len() == 0 {
				return v, false
			}
			v = v.Index(0)
			continue
		}
		found := false
		for i := range v.NumField() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
			if name == k {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return v, false
		}
	}
	return v, true
}

var located = regexp.MustCompile(`t\.yaml:\d+:\d+: `)

// TestExplicitZeroIsNeverDefaulted sets every key the format accepts, one
// at a time, to its zero ("0", "0s", "", false, []) in a valid file: the
// file is either refused with the key's line, or decoded with the zero
// kept. A zero silently replaced by a default fails.
func TestExplicitZeroIsNeverDefaulted(t *testing.T) {
	var keys []leafKey
	leafKeys(reflect.TypeFor[Scenario](), "", nil, &keys)
	if len(keys) < 60 {
		t.Fatalf("walked only %d keys", len(keys))
	}
	var kept, refused []string
	for _, k := range keys {
		t.Run(k.path, func(t *testing.T) {
			tree := zeroBase()
			setPath(tree, k.keys, zeroYAML(k.typ), "")
			data, err := yaml.Marshal(tree)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Decode("t.yaml", data)
			if err != nil {
				msg := err.Error()
				ok := false
				for p := k.path; p != ""; p = parentPath(p) {
					if strings.Contains(msg, p) {
						ok = true
						break
					}
				}
				if !ok || !located.MatchString(msg) || strings.Contains(msg, "unknown key") {
					t.Fatalf("refused without the key's line and path:\n%s\nfile:\n%s", msg, data)
				}
				refused = append(refused, k.path)
				return
			}
			v, ok := valueAt(s, k.keys)
			if !ok {
				t.Fatalf("decoded scenario has no %s", k.path)
			}
			if !(v.IsZero() || (v.Kind() == reflect.Slice && v.Len() == 0)) {
				t.Fatalf("explicit zero of %s became %v\nfile:\n%s", k.path, v.Interface(), data)
			}
			kept = append(kept, k.path)
		})
	}
	t.Logf("zero kept as given: %s", strings.Join(kept, ", "))
	t.Logf("zero refused: %s", strings.Join(refused, ", "))
}

func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i <= 0 {
		return ""
	}
	return p[:i]
}

// TestAbsentKeysTakeDefaults is the other half: the same keys left out
// take the documented defaults.
func TestAbsentKeysTakeDefaults(t *testing.T) {
	data, err := yaml.Marshal(zeroBase())
	if err != nil {
		t.Fatal(err)
	}
	s, err := Decode("t.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(s.Geography.ZipfExponent, s.DNS.TTL, s.Origins[0].Weight, s.Client.CatchupRequests, s.Origins[0].HandshakeLatency, s.Overload.RetryAfter, s.Overload.LatencyStages)
	if want := "1 1m0s 1 1 50ms 5s false"; got != want {
		t.Fatalf("defaults %s, want %s", got, want)
	}
}
