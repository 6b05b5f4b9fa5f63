// Package config decodes the YAML configuration files of every corral
// server the same way: strictly, with errors that name the file, the line
// and the key.
//
// Load is what most callers want. It reads a file and rejects unknown keys
// (every one at once, in the order of the file, with the nearest known key
// at that level), values of the wrong kind or range and bad durations, with
// messages in the words of the file, never naming a Go type:
//
//	config: dns.yaml:12:5: zones[0].tll: unknown key "tll" (did you mean "ttl"?)
//	dns.yaml:14:7: zones[0].records[0].n: "eight" is not a whole number
//
// Every duration (a time.Duration field, in the file or the environment)
// is a number with a unit ("500ms", "60s", "1h", "1d") or plain seconds
// ("60"); ParseDuration reads them.
//
// applies single-value overrides from the environment (CORRAL_<PART>_<KEY>),
// then calls the value's Validate method and maps the field paths of its
// errors back to lines of the file.
//
// Validate methods report a bad value with Errorf (or Field), giving the
// key path in the same dotted form the file uses ("zones[0].ttl"), so the
// message can name the line.
//
// The package imports nothing of corral: it is leaf plumbing shared by the
// servers.
package config
