package scenario

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const minimal = `name: t
duration: 1m
population:
  devices: 1000
  initial: 500
dns:
  policy: multivalue
origins:
  - name: lb
    count: 2
    headroom: 1.5
    max_new_per_second: 100
`

func TestDecodeFillsDefaults(t *testing.T) {
	s, err := Decode("t.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case s.Seed != 1, s.Step != time.Second, s.Scale != 1, s.DNS.TTL != 60*time.Second,
		s.Edge.Pick != "first", s.Overload.Mode != "errors", s.Client.ConnectTimeout != 10*time.Second,
		len(s.Population.Priorities) != 1, s.Population.Tenants != 1, s.Origins[0].Weight != 1, s.Sim.Quantiles != 64:
		t.Fatalf("defaults not filled: %+v", s)
	}
}

// TestStormDefaults: a kill is a crash of one origin, an unhealthy
// storm takes one origin, unless the file says otherwise.
func TestStormDefaults(t *testing.T) {
	s, err := Decode("t.yaml", []byte(minimal+"traffic:\n  kill:\n    - {at: 1s}\n    - {at: 2s, signal: stop, origins: 2, for: 3s}\n  unhealthy:\n    - {at: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	k, u := s.Traffic.Kill, s.Traffic.Unhealthy
	if k[0].Signal != "kill" || k[0].Origins != 1 || k[1].Signal != "stop" || k[1].Origins != 2 || k[1].For != 3*time.Second || u[0].Origins != 1 {
		t.Fatalf("kill %+v, unhealthy %+v: defaults not filled", k, u)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeErrorsNameLineAndKey(t *testing.T) {
	tests := []struct {
		name string
		edit func(string) string
		want []string
	}{
		{"unknown top-level key", func(s string) string { return s + "sead: 3\n" }, []string{"t.yaml:13:", `unknown key "sead"`}},
		{"unknown nested key", func(s string) string { return strings.Replace(s, "    count: 2", "    cuont: 2", 1) }, []string{"t.yaml:10:", `unknown key "cuont"`}},
		{"bad duration", func(s string) string { return strings.Replace(s, "duration: 1m", "duration: 1 minute", 1) }, []string{"t.yaml:2:", "duration", "bad duration"}},
		{"bad value names its line", func(s string) string {
			return strings.Replace(s, "max_new_per_second: 100", "max_new_per_second: -1", 1)
		}, []string{"t.yaml:12:", "origins[0].max_new_per_second", "must be in (0, "}},
		{"unknown policy", func(s string) string { return strings.Replace(s, "policy: multivalue", "policy: roundrobin", 1) }, []string{"t.yaml:7:", "dns.policy", "roundrobin"}},
		{"a policy by client location", func(s string) string { return strings.Replace(s, "policy: multivalue", "policy: cidr", 1) }, []string{"t.yaml:7:", "dns.policy", "does not model", "weighted-subset, shuffle)"}},
		{"capacity is required", func(s string) string { return strings.Replace(s, "    headroom: 1.5\n", "", 1) }, []string{"origins[0].max_connections", "capacity is an input"}},
		{"arrivals beyond the population", func(s string) string {
			return s + "traffic:\n  arrivals:\n    - {at: 0s, devices: 900}\n"
		}, []string{"population.devices", "below initial plus arrivals"}},
		{"bad backoff", func(s string) string { return s + "client:\n  backoff: {policy: full, jitter: 0.3}\n" }, []string{"client.backoff", "jitter applies only to policy grpc"}},
		{"publish priority not a class", func(s string) string {
			return s + "traffic:\n  publish:\n    - {at: 1s, for: 5s, priority: P7, per_second: 10}\n"
		}, []string{"t.yaml:15:", "traffic.publish[0].priority", `"P7" is not a class`}},
		{"publish rate", func(s string) string {
			return s + "traffic:\n  publish:\n    - {at: 1s, for: 5s, priority: P0, per_second: 0}\n"
		}, []string{"traffic.publish[0].per_second", "must be in (0, 1e6]"}},
		{"mass close origins", func(s string) string {
			return s + "traffic:\n  mass_close:\n    - {at: 1s, origins: -1}\n"
		}, []string{"traffic.mass_close[0].origins", "must be in [1, 10000]"}},
		{"kill signal", func(s string) string {
			return s + "traffic:\n  kill:\n    - {at: 1s, signal: term}\n"
		}, []string{"t.yaml:15:", "traffic.kill[0].signal", `unknown "term" (want one of kill, stop)`}},
		{"kill for a crash", func(s string) string {
			return s + "traffic:\n  kill:\n    - {at: 1s, signal: kill, for: 5s}\n"
		}, []string{"traffic.kill[0].for", "applies to signal stop only"}},
		{"unhealthy origins", func(s string) string {
			return s + "traffic:\n  unhealthy:\n    - {at: 1s, origins: -1, for: -1s}\n"
		}, []string{"traffic.unhealthy[0]: at and for", "traffic.unhealthy[0].origins"}},
		{"move to an unknown region", func(s string) string {
			return strings.Replace(s, "    count: 2\n", "    count: 2\n    region: east\n", 1) + "traffic:\n  move:\n    - {at: 1s, from: east, to: west}\n"
		}, []string{"t.yaml:16:", "traffic.move[0].to", `no origin group is in region "west"`}},
		{"move within a region", func(s string) string {
			return strings.Replace(s, "    count: 2\n", "    count: 2\n    region: east\n", 1) + "traffic:\n  move:\n    - {at: 1s, from: east, to: east}\n"
		}, []string{"traffic.move[0].to", "is the region the devices move from"}},
		{"channels", func(s string) string {
			return strings.Replace(s, "  initial: 500\n", "  initial: 500\n  channels: 500\n", 1)
		}, []string{"t.yaml:6:", "population.channels", "must be in [1, 128]"}},
		{"target not a WebSocket URL", func(s string) string {
			return s + "target:\n  urls:\n    - ws://origin.corral.test:7400/v1/ws\n    - http://127.0.1.1:7400\n"
		}, []string{"t.yaml:16:", "target.urls[1]", "want ws://host:port"}},
		{"target without a port", func(s string) string { return s + "target: {urls: [ws://origin.corral.test/v1/ws]}\n" }, []string{"t.yaml:13:", "target.urls[0]"}},
		{"target resolver", func(s string) string {
			return s + "target:\n  urls: [ws://origin.corral.test:7400]\n  resolver: localhost\n"
		}, []string{"t.yaml:15:", "target.resolver", "want ip:port"}},
		{"priority shares", func(s string) string {
			return strings.Replace(s, "  initial: 500\n", "  initial: 500\n  priorities: [{name: P0, share: 0.5}, {name: P1, share: 0.4}]\n", 1)
		}, []string{"population.priorities", "add up to 0.9"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("t.yaml", []byte(tc.edit(minimal)))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "scenario: ") {
				t.Errorf("error %q does not start with the package name", err)
			}
		})
	}
}

// TestRejectsOutcomeFields: no key may set an outcome, wherever it
// stands, and the message names the line.
func TestRejectsOutcomeFields(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{"error_rate: 0.02\n", "error_rate"},
		{"origins_5xx: 0.1\n", "origins_5xx"},
		{"traffic:\n  disconnects:\n    - {at: 1s, share: 1, success_rate: 0.9}\n", "success_rate"},
		{"overload:\n  mode: adaptive\n  shed_rate: 0.3\n", "shed_rate"},
		{"expected_downtime: 10s\n", "expected_downtime"},
		{"target_utilisation: 0.8\n", "target_utilisation"},
	} {
		_, err := Decode("t.yaml", []byte(minimal+tc.yaml))
		if err == nil || !strings.Contains(err.Error(), "would set an outcome") || !strings.Contains(err.Error(), `"`+tc.key+`"`) || !strings.Contains(err.Error(), "t.yaml:") {
			t.Errorf("%s: got %v", tc.key, err)
		}
	}
}

func TestVariantsExpandTheSweep(t *testing.T) {
	s, err := Decode("t.yaml", []byte(minimal+"client:\n  backoff: {policy: grpc, jitter: 0.1}\nsweep:\n  backoff: [none, grpc, full]\n  overload: [errors, adaptive]\n  origin_count: [6, 2]\n"))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := s.Variants()
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 12 {
		t.Fatalf("%d variants, want 12", len(vs))
	}
	first, last := vs[0], vs[len(vs)-1]
	if first.Name != "backoff=none overload=errors origins=6" || last.Name != "backoff=full overload=adaptive origins=2" {
		t.Errorf("names %q .. %q", first.Name, last.Name)
	}
	if last.Scenario.Client.Backoff.Jitter != 0 || vs[4].Scenario.Client.Backoff.Jitter != 0.1 {
		t.Errorf("jitter kept only for grpc: full %v, grpc %v", last.Scenario.Client.Backoff.Jitter, vs[4].Scenario.Client.Backoff.Jitter)
	}
	if last.Scenario.Origins[0].Count != 2 || s.Origins[0].Count != 2 || len(last.Scenario.Sweep.Backoff) != 0 {
		t.Errorf("variant changes leaked or sweep kept: %+v", last.Scenario.Origins)
	}
	vs[0].Scenario.Origins[0].Name = "changed"
	if s.Origins[0].Name != "lb" {
		t.Error("a variant shares its origins with the scenario")
	}
}

// TestShippedScenariosLoad loads every file under scenarios/ (and its
// reliability/ files, which kraken runs).
func TestShippedScenariosLoad(t *testing.T) {
	files, err := filepath.Glob("../scenarios/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("scenario files: %v, %v", files, err)
	}
	more, _ := filepath.Glob("../scenarios/reliability/*.yaml")
	files = append(files, more...)
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if _, err := s.Variants(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.HasPrefix(err.Error(), "scenario: ") {
		t.Errorf("missing file: %v", err)
	}
}

// TestDurationsTakeSeconds: a scenario's TTL and intervals are durations
// or plain seconds, like a zone's TTL.
func TestDurationsTakeSeconds(t *testing.T) {
	s, err := Decode("t.yaml", []byte(strings.Replace(minimal, "  policy: multivalue\n", "  policy: multivalue\n  ttl: 60\n", 1)+"step: 0.5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.DNS.TTL != time.Minute || s.Step != 500*time.Millisecond {
		t.Errorf("ttl: 60 gave %v, step: 0.5 gave %v", s.DNS.TTL, s.Step)
	}
}

// TestLocateNamesTheLine: an error a caller makes about a key of a loaded
// file (kraken refusing a key it cannot run) comes back with the file, the
// line and the column of the key; a key missing from the file is placed at
// its parent.
func TestLocateNamesTheLine(t *testing.T) {
	src := minimal + "traffic:\n  poison:\n    - {at: 1s, tenant: 0}\n"
	s, err := Decode("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := s.Locate(Errorf("traffic.poison[0]", "not run here")).Error()
	if want := "scenario: t.yaml:15:7: traffic.poison[0]: not run here"; got != want {
		t.Errorf("Locate = %q, want %q", got, want)
	}
	got = s.Locate(Errorf("population.protocol", "grpc not run here")).Error()
	if !strings.Contains(got, "t.yaml:3:") {
		t.Errorf("a defaulted key not in the file: %q, want its parent's line 3", got)
	}
	if s.File() != "t.yaml" {
		t.Errorf("File = %q", s.File())
	}
	if (&Scenario{}).Locate(nil) != nil {
		t.Error("Locate(nil) is not nil")
	}
}

// TestTargetDecodes: a target of names through a resolver, or of
// addresses, decodes as written.
func TestTargetDecodes(t *testing.T) {
	s, err := Decode("t.yaml", []byte(minimal+"target:\n  urls: [ws://origin.corral.test:7400/v1/ws, wss://127.0.1.2:7443]\n  resolver: 127.0.0.1:5353\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Target.URLs) != 2 || s.Target.URLs[1] != "wss://127.0.1.2:7443" || s.Target.Resolver != "127.0.0.1:5353" {
		t.Errorf("target %+v", s.Target)
	}
}

// TestOriginCountKeepsEachOrigin: the origin_count sweep changes how many
// origins of the first group there are, never the size of one: every
// per-origin figure, and the connections a headroom gives one origin at
// the file's count, are the same in every variant.
func TestOriginCountKeepsEachOrigin(t *testing.T) {
	s, err := Decode("t.yaml", []byte(minimal+`    backlog: 50
    max_requests_per_second: 30
    max_new_streams_per_second: 70
sweep:
  dns_policy: [weighted, multivalue]
  origin_count: [2, 6]
`))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := s.Variants()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
		o := v.Scenario.Origins[0]
		// headroom 1.5 of 1,000 devices over the file's 2 origins.
		if o.MaxConnections != 750 || o.Headroom != 0 || o.MaxNewPerSecond != 100 || o.Backlog != 50 ||
			o.MaxRequestsPerSecond != 30 || o.MaxNewStreamsPerSecond != 70 {
			t.Errorf("%s: origin %+v, want each origin as the file sizes it at count 2", v.Name, o)
		}
	}
	if got, want := strings.Join(names, ", "), "dns=weighted origins=2, dns=weighted origins=6, dns=multivalue origins=2, dns=multivalue origins=6"; got != want {
		t.Errorf("variants %s, want %s", got, want)
	}
	if vs[2].Scenario.DNS.Policy != "multivalue" || vs[0].Scenario.DNS.Policy != "weighted" {
		t.Errorf("dns_policy not applied")
	}
}

// TestDrawsRefusedWithLine: sim.draws must be in [1, 1000]; a bad value is
// refused with its line, and the key left out draws once.
func TestDrawsRefusedWithLine(t *testing.T) {
	base := "duration: 10s\npopulation: {devices: 1000}\ndns: {policy: multivalue}\norigins:\n  - {name: lb, max_connections: 2000, max_new_per_second: 100}\n"
	s, err := Decode("t.yaml", []byte(base))
	if err != nil || s.Sim.Draws != 1 {
		t.Fatalf("left out: draws %v, %v; want 1", s, err)
	}
	for _, v := range []string{"0", "-2", "1001"} {
		_, err := Decode("t.yaml", []byte(base+"sim:\n  draws: "+v+"\n"))
		if err == nil || !strings.Contains(err.Error(), "t.yaml:7:") || !strings.Contains(err.Error(), "sim.draws") {
			t.Errorf("draws %s: %v, want a refusal at t.yaml:7", v, err)
		}
	}
	if s, err := Decode("t.yaml", []byte(base+"sim:\n  draws: 12\n")); err != nil || s.Sim.Draws != 12 {
		t.Errorf("draws 12: %v, %v", s, err)
	}
}
