package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/client"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// subFlags are the flags of `corral sub`.
type subFlags struct {
	token    string
	priority string
	asJSON   bool
	count    int
	tls      tlsFlags
}

// newSubCmd builds `corral sub`: a session that prints the messages of
// channels as they arrive.
func newSubCmd(g *globals) *cobra.Command {
	f := &subFlags{}
	cmd := &cobra.Command{
		Use:   "sub URL CHANNEL...",
		Short: "Subscribe to channels and print their messages as they arrive",
		Long: `corral sub opens a session with a hub (or an edge) and prints every message
of the channels as it arrives: "[channel #offset] data" per line, or one JSON
object per line with --json ({"channel", "epoch", "offset", "priority",
"time", "data"}, or "data_base64" when the data is not UTF-8 text).

URL is ws://host:port[/v1/ws] or wss://... (WebSocket), grpc://host:port or
grpcs://... (gRPC); several comma-separated URLs are tried in random order.
The session token comes from --token or $CORRAL_TOKEN (corral token mints
one). --ca-file trusts a private CA (a test certificate) for wss:// and
grpcs://, --server-name checks the certificate against another name than
the URL's host. When the connection drops, sub reconnects with jittered backoff and
resumes every channel from the last message it printed: it prints each
message once, and says on stderr which offsets were lost when the hub no
longer had them.
Connection changes go to stderr, messages to stdout. A terminal refusal
(token rejected, channel not allowed) ends it with exit status 1.`,
		Example: `  export CORRAL_TOKEN=$(corral token --secret-env CORRAL_DEV_SECRET --tenant demo --channels 'news.*')
  corral sub ws://127.0.0.1:7400/v1/ws news.eu news.us
  corral sub --json --count 10 grpc://127.0.0.1:7401 news.eu
  corral sub --ca-file ca.pem --server-name hub.corral.test wss://127.0.0.1:7400 news.eu`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSub(cmd.Context(), g, f, args[0], args[1:])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.token, "token", "", "session token (default $CORRAL_TOKEN)")
	fl.StringVar(&f.priority, "priority", "p2", "session priority: p0, p1 or p2 (at most the token's)")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object per message")
	fl.IntVar(&f.count, "count", 0, "exit after this many messages (0: run until interrupted)")
	f.tls.add(cmd)
	return cmd
}

// subMessage is a line of `corral sub --json`.
type subMessage struct {
	Channel    string `json:"channel"`
	Epoch      string `json:"epoch"`
	Offset     uint64 `json:"offset"`
	Priority   string `json:"priority"`
	Time       string `json:"time"`
	Data       string `json:"data,omitempty"`
	DataBase64 []byte `json:"data_base64,omitempty"`
}

func runSub(ctx context.Context, g *globals, f *subFlags, url string, channels []string) error {
	token := cmp.Or(f.token, os.Getenv("CORRAL_TOKEN"))
	if token == "" {
		return errors.New("sub: no token: pass --token or set CORRAL_TOKEN (corral token mints one)")
	}
	rank, ok := parseRank(f.priority)
	if !ok {
		return fmt.Errorf("sub: --priority %q: want p0, p1 or p2", f.priority)
	}
	if f.count < 0 {
		return fmt.Errorf("sub: --count %d: must not be negative", f.count)
	}
	tc, err := f.tls.config()
	if err != nil {
		return fmt.Errorf("sub: %w", err)
	}
	c, err := client.Dial(ctx, client.Config{Addrs: strings.Split(url, ","), Token: token, Priority: priorityOfRank(rank), Name: "corral-sub", TLS: tc})
	if err != nil {
		return fmt.Errorf("sub: %w", f.tls.explainTLS(err))
	}
	defer c.Close()
	for _, ch := range channels {
		s, err := c.Subscribe(ctx, ch)
		if err != nil {
			return fmt.Errorf("sub: subscribe %s: %w", ch, err)
		}
		fmt.Fprintf(g.stderr, "corral: subscribed to %s (at offset %d)\n", s.GetChannel(), s.GetPosition().GetOffset())
	}
	n := 0
	var last wire.Close
	for {
		var e client.Event
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-c.Events():
			if !ok {
				if err := c.Err(); err != nil {
					return fmt.Errorf("sub: %w", err)
				}
				return fmt.Errorf("sub: stopped: %v", last)
			}
			e = ev
		}
		switch e.Kind {
		case client.EventMessage:
			if err := printMessage(g, f.asJSON, e.Message); err != nil {
				return err
			}
			if n++; f.count > 0 && n >= f.count {
				return nil
			}
		case client.EventConnected:
			fmt.Fprintf(g.stderr, "corral: connected to %s (session %s)\n", e.Addr, e.SessionID)
		case client.EventDisconnected:
			last = e.Close
			fmt.Fprintf(g.stderr, "corral: %v\n", e)
		case client.EventGap:
			fmt.Fprintf(g.stderr, "corral: %s: offsets %d to %d were lost (%s)\n", e.Channel, e.Gap.GetFromOffset(), e.Gap.GetToOffset(), e.Gap.GetReason())
		case client.EventRefused:
			fmt.Fprintf(g.stderr, "corral: %s: refused after a reconnect: %v\n", e.Channel, e.Close)
		}
	}
}

func printMessage(g *globals, asJSON bool, m *corralv1.Message) error {
	if !asJSON {
		_, err := fmt.Fprintf(g.stdout, "[%s #%d] %s\n", m.GetChannel(), m.GetOffset(), m.GetData())
		return err
	}
	line := subMessage{
		Channel: m.GetChannel(), Epoch: m.GetEpoch(), Offset: m.GetOffset(),
		Priority: fmt.Sprintf("p%d", wire.Rank(m.GetPriority())),
		Time:     time.UnixMilli(m.GetTimeUnixMs()).UTC().Format(time.RFC3339Nano),
	}
	if utf8.Valid(m.GetData()) {
		line.Data = string(m.GetData())
	} else {
		line.DataBase64 = m.GetData()
	}
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(g.stdout, "%s\n", b)
	return err
}

// priorityOfRank returns the client priority of a rank.
func priorityOfRank(rank int) client.Priority {
	switch rank {
	case 0:
		return client.PriorityP0
	case 1:
		return client.PriorityP1
	}
	return client.PriorityP2
}
