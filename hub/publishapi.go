package hub

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/corralhq/corral/hub/auth"
	"github.com/corralhq/corral/hub/history"
	"github.com/corralhq/corral/wire"
)

// httpMux serves the HTTP publish API on POST /v1/publish, beside the
// WebSocket upgrades of /v1/ws (wsserve routes those).
func (h *Hub) httpMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/publish", h.httpPublish)
	return mux
}

// publishBody is the JSON body of POST /v1/publish. Data is a string
// (stored as its UTF-8 bytes) unless DataBase64 is set.
type publishBody struct {
	Tenant          string `json:"tenant"`
	Channel         string `json:"channel"`
	Priority        string `json:"priority"` // "p0", "p1" or "p2" (default)
	Data            string `json:"data"`
	DataBase64      []byte `json:"data_base64"`
	ClientMessageID string `json:"client_message_id"`
}

type publishReply struct {
	Channel   string `json:"channel"`
	Epoch     string `json:"epoch"`
	Offset    uint64 `json:"offset"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

type errorReply struct {
	Code  uint32 `json:"code"`
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func httpStatusOf(c wire.CloseCode) int {
	switch c {
	case wire.ClosePolicyViolation:
		return http.StatusUnauthorized
	case wire.CloseForbidden:
		return http.StatusForbidden
	case wire.CloseTooBig:
		return http.StatusRequestEntityTooLarge
	case wire.CloseTryAgainLater, wire.CloseGoingAway, wire.CloseInternal:
		return http.StatusServiceUnavailable
	case wire.CloseRateLimited:
		return http.StatusTooManyRequests
	}
	return http.StatusBadRequest
}

// checkAPIKey checks a backend's API key for tenant, for the HTTP and gRPC
// publish APIs. A missing or unknown key is not authenticated: 1008 (HTTP
// 401, gRPC Unauthenticated). A valid key for a tenant it does not serve is
// authenticated but not authorised: 4005 (HTTP 403, gRPC PermissionDenied).
func (h *Hub) checkAPIKey(key, tenant string) error {
	_, err := h.verifier.CheckAPIKey(key, tenant)
	if err == nil {
		return nil
	}
	var ae *auth.Error
	if errors.As(err, &ae) && ae.Reason == auth.ReasonTenant {
		h.metrics.authRejected.WithLabelValues(string(auth.ReasonTenant)).Inc()
		return wire.Close{Code: wire.CloseForbidden, Text: "API key not valid for tenant " + strconv.Quote(tenant)}
	}
	h.metrics.authRejected.WithLabelValues("api_key").Inc()
	return wire.Close{Code: wire.ClosePolicyViolation, Text: "API key rejected"}
}

func (h *Hub) httpPublish(w http.ResponseWriter, r *http.Request) {
	fail := func(c wire.Close) {
		if c.RetryAfter > 0 {
			// Retry-After carries a point: drawn from the window, and
			// the caller's own policy spreads above it.
			ra := c.RetryAfter + time.Duration(rand.Float64()*float64(c.RetryWithin))
			w.Header().Set("Retry-After", strconv.Itoa(int((ra+time.Second-1)/time.Second)))
		}
		writeJSON(w, httpStatusOf(c.Code), errorReply{Code: uint32(c.Code), Error: c.Text})
	}
	maxData := h.codecCheck.Config().MaxFrameBytes
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(2*maxData)+1024))
	if err != nil {
		fail(wire.Close{Code: wire.CloseBadRequest, Text: "reading the body: " + err.Error()})
		return
	}
	var req publishBody
	if err := json.Unmarshal(body, &req); err != nil {
		fail(wire.Close{Code: wire.CloseBadRequest, Text: "body is not the publish JSON: " + err.Error()})
		return
	}
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if err := h.checkAPIKey(key, req.Tenant); err != nil {
		fail(wire.CloseOf(err))
		return
	}
	data := []byte(req.Data)
	if req.DataBase64 != nil {
		data = req.DataBase64
	}
	prio, ok := parsePriority(req.Priority)
	if !ok {
		fail(wire.Close{Code: wire.CloseBadRequest, Text: "priority: want p0, p1 or p2"})
		return
	}
	// publishVia validates the rest, as for every publish path.
	res, err := h.publishVia(r.Context(), PublishRequest{Tenant: req.Tenant, Channel: req.Channel, Priority: prio, Data: data, ClientMessageID: req.ClientMessageID}, "http")
	if err != nil {
		fail(wire.CloseOf(err))
		return
	}
	writeJSON(w, http.StatusOK, publishReply{Channel: res.Channel, Epoch: res.Epoch, Offset: res.Offset, Duplicate: res.Duplicate})
}

// parsePriority reads the priority of a publish API: "p0", "p1", "p2" (any
// case) or the rank digit, "" for the default P2.
func parsePriority(v string) (p wire.Priority, ok bool) {
	switch strings.ToLower(v) {
	case "", "p2", "2":
		return wire.P2, true
	case "p1", "1":
		return wire.P1, true
	case "p0", "0":
		return wire.P0, true
	}
	return wire.P2, false
}

// natsPublish is the plain-NATS publish API: the payload of a message on
// corral.publish.<tenant>.<channel> is published with the priority of its
// Corral-Priority header (0, 1, 2 or p0, p1, p2; default 2) and the id of its Corral-Client-Id
// header. Requests (with a reply subject) get the JSON publish reply. NATS
// access is trusted: whoever can publish on the subject is a backend.
func (h *Hub) natsPublish(ctx context.Context, m *nats.Msg) {
	rest := strings.TrimPrefix(m.Subject, subjectPublish)
	tenant, channel, ok := strings.Cut(rest, ".")
	reply := func(v any) {
		if m.Reply != "" {
			b, _ := json.Marshal(v)
			_ = m.Respond(b)
		}
	}
	if !ok {
		reply(errorReply{Code: uint32(wire.CloseBadRequest), Error: "subject must be corral.publish.<tenant>.<channel>"})
		return
	}
	prio, clientID := wire.P2, ""
	if m.Header != nil {
		var ok bool
		if prio, ok = parsePriority(m.Header.Get(history.HeaderPriority)); !ok {
			reply(errorReply{Code: uint32(wire.CloseBadRequest), Error: "priority: header " + history.HeaderPriority + " must be 0, 1, 2, p0, p1 or p2"})
			return
		}
		clientID = m.Header.Get(history.HeaderClientID)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := h.publishVia(pctx, PublishRequest{Tenant: tenant, Channel: channel, Priority: prio, Data: m.Data, ClientMessageID: clientID}, "nats")
	if err != nil {
		c := wire.CloseOf(err)
		reply(errorReply{Code: uint32(c.Code), Error: c.Text})
		return
	}
	reply(publishReply{Channel: res.Channel, Epoch: res.Epoch, Offset: res.Offset, Duplicate: res.Duplicate})
}
