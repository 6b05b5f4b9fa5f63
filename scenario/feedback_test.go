package scenario

import (
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/authdns/answer"
)

// withFeedback returns the file f with dns.feedback set to fb.
func withFeedback(f, fb string) string {
	return strings.Replace(f, "dns:\n", "dns:\n  feedback: "+fb+"\n", 1)
}

// TestFeedbackDefaultsAreAnswers: dns.feedback left out takes
// answer.FeedbackConfig's defaults (and a 1 s interval) and is off.
func TestFeedbackDefaultsAreAnswers(t *testing.T) {
	s, err := Decode("t.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	d := answer.DefaultFeedback
	want := Feedback{Interval: time.Second, Floor: d.Floor, Ceiling: d.Ceiling, MaxStep: d.MaxStep, Hysteresis: d.Hysteresis, Timeout: d.Timeout, MaxTTL: d.MaxTTL}
	if s.DNS.Feedback != want {
		t.Fatalf("dns.feedback %+v, want %+v", s.DNS.Feedback, want)
	}
	s, err = Decode("t.yaml", []byte(withFeedback(minimal, "{enabled: true, floor: 0.2, interval: 2s}")))
	if err != nil {
		t.Fatal(err)
	}
	want.Enabled, want.Floor, want.Interval = true, 0.2, 2*time.Second
	if s.DNS.Feedback != want {
		t.Fatalf("dns.feedback %+v, want %+v", s.DNS.Feedback, want)
	}
}

// TestFeedbackErrorsNameTheKey: each bad dns.feedback is refused with the
// key's line and path.
func TestFeedbackErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, feedback string
		want           []string
	}{
		{"an explicit 0 authdns would read as its default", "{enabled: true, hysteresis: 0}", []string{"dns.feedback.hysteresis", "0 is not usable", "default (0.05)"}},
		{"a zero timeout", "{enabled: true, timeout: 0s}", []string{"dns.feedback.timeout", "default (5s)"}},
		{"a zero max_ttl", "{enabled: true, max_ttl: 0s}", []string{"dns.feedback.max_ttl", "0 is not usable", "default (30s)"}},
		{"a max_ttl of part of a second", "{enabled: true, max_ttl: 1500ms}", []string{"dns.feedback.max_ttl", "whole seconds", "got 1.5s"}},
		{"a negative max_ttl", "{enabled: true, max_ttl: -10s}", []string{"dns.feedback:", "max_ttl -10s", "need max_ttl > 0"}},
		{"an interval shorter than the step", "{enabled: true, interval: 500ms}", []string{"dns.feedback.interval", "whole number of steps"}},
		{"an interval between steps", "{enabled: true, interval: 1500ms}", []string{"dns.feedback.interval", "got 1.5s"}},
		{"a floor above 1", "{enabled: true, floor: 1.5}", []string{"dns.feedback:", "floor 1.5", "need 0 < floor <= 1"}},
		{"hysteresis above max_step", "{enabled: true, max_step: 0.1, hysteresis: 0.2}", []string{"dns.feedback:", "hysteresis 0.2"}},
		{"bounds while feedback is off", "{floor: 0.2, ceiling: 3}", []string{"dns.feedback.enabled", "is off while dns.feedback sets floor, ceiling"}},
		{"a cap while feedback is off", "{max_ttl: 10s}", []string{"dns.feedback.enabled", "is off while dns.feedback sets max_ttl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("t.yaml", []byte(withFeedback(minimal, tc.feedback)))
			if err == nil {
				t.Fatalf("dns.feedback %s accepted", tc.feedback)
			}
			for _, w := range append(tc.want, "t.yaml:") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// Feedback off: its default interval is no constraint on the step.
	if _, err := Decode("t.yaml", []byte("step: 5s\n"+minimal)); err != nil {
		t.Errorf("a 5 s step without feedback: %v", err)
	}
	// A policy feedback does not weight.
	_, err := Decode("t.yaml", []byte(withFeedback(strings.Replace(minimal, "policy: multivalue", "policy: simple", 1), "{enabled: true}")))
	if err == nil || !strings.Contains(err.Error(), "dns.policy") || !strings.Contains(err.Error(), "not weighted by load feedback") {
		t.Errorf("feedback on the simple policy: %v", err)
	}
}

// TestFeedbackSweep: sweep.dns_feedback runs the file with feedback off
// and on, the bounds of dns.feedback in both, named by the variant.
func TestFeedbackSweep(t *testing.T) {
	s, err := Decode("t.yaml", []byte(withFeedback(minimal, "{floor: 0.3}")+"sweep:\n  dns_policy: [weighted, multivalue]\n  dns_feedback: [false, true]\n"))
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
		if on := strings.Contains(v.Name, "feedback=on"); v.Scenario.DNS.Feedback.Enabled != on || v.Scenario.DNS.Feedback.Floor != 0.3 {
			t.Errorf("%s: dns.feedback %+v", v.Name, v.Scenario.DNS.Feedback)
		}
	}
	if got, want := strings.Join(names, ", "), "dns=weighted feedback=off, dns=weighted feedback=on, dns=multivalue feedback=off, dns=multivalue feedback=on"; got != want {
		t.Errorf("variants %s, want %s", got, want)
	}
	_, err = Decode("t.yaml", []byte(minimal+"sweep:\n  dns_policy: [weighted, failover]\n  dns_feedback: [true]\n"))
	if err == nil || !strings.Contains(err.Error(), "sweep.dns_policy[1]") {
		t.Errorf("feedback swept on over the failover policy: %v", err)
	}
}
