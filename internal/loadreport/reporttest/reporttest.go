// Package reporttest reads load reports in tests: the hubs' and edges'
// load tests share it. Apart from internal/testkit so that the packages
// whose tests use testkit (and the modules under bench/ that import them)
// do not need NATS.
package reporttest

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/corralhq/corral/internal/loadreport"
)

// NextReport returns the next load report on sub, decoded, failing the
// test when none comes within 20 s or it does not decode: the one read of
// a report that the hubs' and edges' load tests share.
func NextReport(t testing.TB, sub *nats.Subscription) loadreport.Report {
	t.Helper()
	m, err := sub.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatalf("no load report: %v", err)
	}
	r, err := loadreport.Decode(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// AwaitOpened reads reports on sub until one counts want sessions opened
// (loadreport.Report.Opened) and opened() says so too, failing the test
// when a report counts more or 20 s pass.
func AwaitOpened(t testing.TB, sub *nats.Subscription, want uint64, opened func() uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := NextReport(t, sub)
		if r.Opened == want && opened() == want {
			return
		}
		if r.Opened > want || time.Now().After(deadline) {
			t.Fatalf("report opened %d, stats %d: want the %d sessions opened", r.Opened, opened(), want)
		}
	}
}
