package loadreport

import (
	"context"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/natsutil"
)

func TestPublishDecode(t *testing.T) {
	c, err := natsutil.Connect(context.Background(), natsutil.Config{}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.NC.SubscribeSync(DefaultSubject)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Publish(ctx, c.NC, "", 10*time.Millisecond, nil, func() Report {
			return Report{Node: "h1", Kind: "hub", Addr: "127.0.0.2:80", Sessions: 3, Capacity: 10, Inflight: 1, Limit: 4, Stage: 2}
		})
	}()
	m, err := sub.NextMsg(10 * time.Second)
	cancel()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	r, err := Decode(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Report{Node: "h1", Kind: "hub", Addr: "127.0.0.2:80", Sessions: 3, Capacity: 10, Inflight: 1, Limit: 4, Stage: 2, Interval: 10 * time.Millisecond}); r != want {
		t.Fatalf("decoded %+v, want %+v", r, want)
	}
	if _, err := Decode([]byte(`{"node":"x"}`)); err == nil {
		t.Fatal("a report without addr decoded")
	}
	if _, err := Decode([]byte(`{`)); err == nil {
		t.Fatal("bad JSON decoded")
	}
}
