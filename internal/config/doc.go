// Package config decodes the YAML configuration files of every corral
// server the same way: strictly, with errors that name the file, the line
// and the key.
//
// Load is what most callers want. It reads a file, rejects unknown keys,
// wrong types and bad durations with a message such as
//
//	config: examples/dns.yaml:12:3: zones[0].ttl: time: invalid duration "6o s"
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
