package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/corralhq/corral/internal/report"
	"github.com/corralhq/corral/wire"
	"github.com/corralhq/corral/wire/corralv1"
)

// pubFlags are the flags of `corral pub`.
type pubFlags struct {
	tenant   string
	apiKey   string
	priority string
	id       string
	asJSON   bool
	timeout  time.Duration
	tls      tlsFlags
}

// newPubCmd builds `corral pub`: one publish through a hub's backend
// publish API.
func newPubCmd(g *globals) *cobra.Command {
	f := &pubFlags{}
	cmd := &cobra.Command{
		Use:   "pub URL CHANNEL DATA",
		Short: "Publish one message through a hub's HTTP or gRPC publish API",
		Long: `corral pub publishes DATA on CHANNEL of --tenant as a backend does: with an
API key of the hub's auth.api_keys (--api-key or $CORRAL_API_KEY).

URL http://host:port or https://... uses the HTTP API (POST /v1/publish);
grpc://host:port or grpcs://... the gRPC one (corral.v1.Corral/Publish).
It prints where the message landed ("published CHANNEL offset N (epoch E)"),
or JSON with --json. --id makes a retry a duplicate the hub recognises.
--ca-file trusts a private CA (a test certificate) for https:// and
grpcs://, --server-name checks the certificate against another name than
the URL's host.`,
		Example: `  corral pub --tenant demo --api-key dev-api-key-change-me http://127.0.0.1:7400 news.eu hello
  corral pub --tenant demo --priority p0 grpc://127.0.0.1:7401 news.eu 'breaking'
  corral pub --tenant demo --ca-file ca.pem https://hub.corral.test:7400 news.eu hello`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPub(cmd.Context(), g, f, args[0], args[1], args[2])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.tenant, "tenant", "", "tenant whose channel it is (required)")
	fl.StringVar(&f.apiKey, "api-key", "", "backend API key (default $CORRAL_API_KEY)")
	fl.StringVar(&f.priority, "priority", "p2", "message priority: p0, p1 or p2")
	fl.StringVar(&f.id, "id", "", "client message id: a publish repeated with the same id is a duplicate")
	fl.BoolVar(&f.asJSON, "json", false, "print the hub's answer as JSON: {channel, epoch, offset, duplicate}")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "give up after this long")
	f.tls.add(cmd)
	return cmd
}

// pubResult is what `corral pub --json` prints.
type pubResult struct {
	Channel   string `json:"channel"`
	Epoch     string `json:"epoch"`
	Offset    uint64 `json:"offset"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

func runPub(ctx context.Context, g *globals, f *pubFlags, url, channel, data string) error {
	key := cmp.Or(f.apiKey, os.Getenv("CORRAL_API_KEY"))
	if key == "" {
		return errors.New("pub: no API key: pass --api-key or set CORRAL_API_KEY")
	}
	if f.tenant == "" {
		return errors.New("pub: --tenant is required")
	}
	rank, ok := parseRank(f.priority)
	if !ok {
		return fmt.Errorf("pub: --priority %q: want p0, p1 or p2", f.priority)
	}
	tc, err := f.tls.config()
	if err != nil {
		return fmt.Errorf("pub: %w", err)
	}
	if tc == nil {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	var res pubResult
	switch {
	case strings.HasPrefix(url, "http://"), strings.HasPrefix(url, "https://"):
		res, err = pubHTTP(ctx, strings.TrimSuffix(url, "/"), key, f, rank, channel, data, tc)
	case strings.HasPrefix(url, "grpc://"), strings.HasPrefix(url, "grpcs://"):
		res, err = pubGRPC(ctx, url, key, f, rank, channel, data, tc)
	default:
		return fmt.Errorf("pub: URL %q: want http://, https://, grpc:// or grpcs://", url)
	}
	if err != nil {
		return fmt.Errorf("pub: %w", f.tls.explainTLS(err))
	}
	if f.asJSON {
		return report.JSON(g.stdout, res)
	}
	dup := ""
	if res.Duplicate {
		dup = ", a duplicate of an earlier publish"
	}
	_, err = fmt.Fprintf(g.stdout, "published %s offset %d (epoch %s)%s\n", res.Channel, res.Offset, res.Epoch, dup)
	return err
}

func pubHTTP(ctx context.Context, base, key string, f *pubFlags, rank int, channel, data string, tc *tls.Config) (pubResult, error) {
	body, _ := json.Marshal(map[string]string{
		"tenant": f.tenant, "channel": channel, "priority": fmt.Sprintf("p%d", rank), "data": data, "client_message_id": f.id,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/publish", bytes.NewReader(body))
	if err != nil {
		return pubResult{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return pubResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return pubResult{}, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code  uint32 `json:"code"`
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return pubResult{}, fmt.Errorf("HTTP %d: %d %s", resp.StatusCode, e.Code, e.Error)
		}
		return pubResult{}, fmt.Errorf("HTTP %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	var res pubResult
	if err := json.Unmarshal(b, &res); err != nil {
		return pubResult{}, fmt.Errorf("the answer is not the publish JSON: %w", err)
	}
	return res, nil
}

func pubGRPC(ctx context.Context, url, key string, f *pubFlags, rank int, channel, data string, tc *tls.Config) (pubResult, error) {
	creds := insecure.NewCredentials()
	target, secure := strings.CutPrefix(url, "grpcs://")
	if secure {
		creds = credentials.NewTLS(tc)
	} else {
		target = strings.TrimPrefix(url, "grpc://")
	}
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return pubResult{}, err
	}
	defer cc.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
	p, err := corralv1.NewCorralClient(cc).Publish(ctx, &corralv1.PublishRequest{Tenant: f.tenant, Publish: &corralv1.Publish{
		Channel: channel, Priority: wire.PriorityOfRank(rank), Data: []byte(data), ClientMessageId: f.id,
	}})
	if err != nil {
		return pubResult{}, wire.CloseFromStatus(err)
	}
	return pubResult{Channel: p.GetChannel(), Epoch: p.GetEpoch(), Offset: p.GetOffset(), Duplicate: p.GetDuplicate()}, nil
}
