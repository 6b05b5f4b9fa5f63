package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// applyEnv overrides scalar fields of v from variables named
// prefix_KEY_PATH (keys upper-cased, joined with "_", dashes as "_").
// Fields inside slices and maps are not reachable this way.
func applyEnv(prefix string, v reflect.Value, environ []string) error {
	vars := make(map[string]string)
	for _, kv := range environ {
		k, val, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, prefix+"_") {
			vars[k] = val
		}
	}
	if len(vars) == 0 {
		return nil
	}
	used := make(map[string]bool)
	if err := envStruct(prefix, v, vars, used); err != nil {
		return err
	}
	for k := range vars {
		if !used[k] {
			return fmt.Errorf("environment variable %s names no configuration key", k)
		}
	}
	return nil
}

func envStruct(prefix string, v reflect.Value, vars map[string]string, used map[string]bool) error {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts := yamlName(f)
		if name == "-" {
			continue
		}
		fv := v.Field(i)
		p := prefix
		if !strings.Contains(opts, "inline") {
			p = prefix + "_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
		}
		if fv.Kind() == reflect.Struct {
			if err := envStruct(p, fv, vars, used); err != nil {
				return err
			}
			continue
		}
		s, ok := vars[p]
		if !ok {
			continue
		}
		used[p] = true
		if err := setScalar(fv, s); err != nil {
			return fmt.Errorf("environment variable %s=%q: %w", p, s, err)
		}
	}
	return nil
}

func setScalar(v reflect.Value, s string) error {
	if v.Type() == durationType {
		d, err := ParseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("want %s", want(v.Type()))
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("want %s", want(v.Type()))
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("want a number")
		}
		v.SetFloat(n)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("only lists of strings can be set from the environment")
		}
		parts := strings.Split(s, ",")
		out := reflect.MakeSlice(v.Type(), 0, len(parts))
		for _, p := range parts {
			if p = strings.TrimSpace(p); p != "" {
				out = reflect.Append(out, reflect.ValueOf(p).Convert(v.Type().Elem()))
			}
		}
		v.Set(out)
	default:
		return errors.New("this key cannot be set from the environment")
	}
	return nil
}
