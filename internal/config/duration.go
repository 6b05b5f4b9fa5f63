package config

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// durationHint is how every message about a bad duration says what is
// wanted.
const durationHint = "want a number with a unit, like 500ms, 10s, 1m30s or 1d, or plain seconds, like 60"

// ParseDuration reads a duration as corral's configuration files write
// one, wherever a TTL, an interval or a timeout is given: a number with a
// unit ("60s", "1m30s", "250ms", as time.ParseDuration reads them, and
// leading days and weeks as zone files have them: "1w", "2d12h") or plain
// seconds ("60", "1.5"). Every time.Duration field that Load and Decode
// fill, and every duration set from the environment, is read this way.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	if d, ok := parseDays(s); ok {
		return d, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXpP_") {
		return secondsDuration(f, s)
	}
	return 0, fmt.Errorf("bad duration %q (%s)", s, durationHint)
}

// daysRE matches leading weeks and days ("1w", "2d", "1.5d") and what
// follows them.
var daysRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)([wd])(.*)$`)

// parseDays reads a duration that starts with weeks or days, the rest in
// time.ParseDuration's units ("1w", "2d12h").
func parseDays(s string) (time.Duration, bool) {
	sign := 1.0
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		sign, s = -1, rest
	}
	total, found := 0.0, false
	for {
		m := daysRE.FindStringSubmatch(s)
		if m == nil {
			break
		}
		f, _ := strconv.ParseFloat(m[1], 64)
		unit := 24 * float64(time.Hour)
		if m[2] == "w" {
			unit *= 7
		}
		total += f * unit
		s, found = m[3], true
	}
	if !found {
		return 0, false
	}
	if s != "" {
		rest, err := time.ParseDuration(s)
		if err != nil || rest < 0 {
			return 0, false
		}
		total += float64(rest)
	}
	if total > math.MaxInt64 {
		return 0, false
	}
	return time.Duration(sign * total), true
}

// secondsDuration converts plain seconds to a duration; text is how the
// file wrote them, for the message.
func secondsDuration(f float64, text string) (time.Duration, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > float64(math.MaxInt64)/float64(time.Second) {
		return 0, fmt.Errorf("bad duration %q: out of range (%s)", text, durationHint)
	}
	return time.Duration(math.Round(f * float64(time.Second))), nil
}

// unmarshalDuration is go-yaml's decoder of time.Duration fields: the
// scalar's text (a YAML string, quoted or not, or a number) goes through
// ParseDuration.
func unmarshalDuration(d *time.Duration, b []byte) error {
	s := strings.TrimSpace(string(b))
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		if u, err := strconv.Unquote(`"` + s[1:len(s)-1] + `"`); err == nil {
			s = u
		}
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
