package main

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/corralhq/corral/edge"
	"github.com/corralhq/corral/hub"
	"github.com/corralhq/corral/internal/admin"
)

// statusRefresh is how often the hub's and the edge's status pages reload
// themselves.
const statusRefresh = 2 * time.Second

// hubStatusJSON is the JSON form of the hub's status page (/status).
type hubStatusJSON struct {
	Node            string `json:"node"`
	Ready           bool   `json:"ready"`
	NotReady        string `json:"not_ready,omitempty"` // why not, when not ready
	Draining        bool   `json:"draining"`
	Sessions        int    `json:"sessions"`
	RelayStreams    int    `json:"relay_streams"`
	Stage           string `json:"shed_stage"`
	PublishLimit    int    `json:"publish_limit"`
	HistoryReplicas int64  `json:"history_replicas"`
}

func hubStatus(st hub.Stats) hubStatusJSON {
	j := hubStatusJSON{Node: st.NodeID, Ready: st.Ready == nil, Draining: st.Draining, Sessions: st.Sessions,
		RelayStreams: st.RelayStreams, Stage: st.Stage.String(), PublishLimit: st.PublishLimit, HistoryReplicas: st.HistoryReplicas}
	if st.Ready != nil {
		j.NotReady = st.Ready.Error()
	}
	return j
}

// hubStatusPage is the hub's status page: readiness, sessions, Relay
// streams, shedding and the publish limit, reloading itself.
func hubStatusPage(h *hub.Hub) http.Handler {
	return admin.StatusPage(admin.StatusPageConfig{
		Refresh: statusRefresh,
		JSON:    func() any { return hubStatus(h.Stats()) },
		HTML: func() admin.Status {
			j := hubStatus(h.Stats())
			return admin.Status{
				Title:   "corral hub " + j.Node,
				Summary: readySummary(j.Ready, j.NotReady),
				Bad:     !j.Ready,
				Facts: []admin.Fact{
					{Name: "sessions", Value: strconv.Itoa(j.Sessions)},
					{Name: "relay streams (edges)", Value: strconv.Itoa(j.RelayStreams)},
					{Name: "shed stage", Value: j.Stage, Bad: j.Stage != "normal"},
					{Name: "publish limit", Value: limitText(j.PublishLimit)},
					{Name: "history replicas", Value: strconv.FormatInt(j.HistoryReplicas, 10)},
					{Name: "draining", Value: strconv.FormatBool(j.Draining), Bad: j.Draining},
				},
			}
		},
	})
}

// edgeStatusJSON is the JSON form of the edge's status page (/status).
type edgeStatusJSON struct {
	Node           string             `json:"node"`
	Ready          bool               `json:"ready"`
	NotReady       string             `json:"not_ready,omitempty"`
	Sessions       int                `json:"sessions"`
	Stage          string             `json:"shed_stage"`
	HandshakeLimit int                `json:"handshake_limit"`
	MessageLimit   int                `json:"message_limit"`
	Replay         edgeReplayStatus   `json:"replay"`
	OriginsStale   bool               `json:"origins_stale"`
	Origins        []edgeOriginStatus `json:"origins"`
}

// edgeReplayStatus is the replay cache's counters (edge.ReplayStats).
type edgeReplayStatus struct {
	Hits      int64 `json:"hits"`
	Coalesced int64 `json:"coalesced"`
	Misses    int64 `json:"misses"`
	Messages  int64 `json:"messages"`
	Channels  int64 `json:"channels"`
	Bytes     int64 `json:"bytes"`
}

type edgeOriginStatus struct {
	Addr       string `json:"addr"`
	InAnswer   bool   `json:"in_answer"`
	Sessions   int64  `json:"sessions"`
	Handshakes int64  `json:"handshakes"`
	Ejected    bool   `json:"ejected"`
	Ejections  uint64 `json:"ejections"`
}

func edgeStatus(e *edge.Edge) edgeStatusJSON {
	st := e.Stats()
	j := edgeStatusJSON{Node: e.NodeID(), Sessions: st.Sessions, Stage: st.Stage.String(),
		HandshakeLimit: st.HandshakeLimit, MessageLimit: st.MessageLimit,
		Replay: edgeReplayStatus{Hits: st.Replay.Hits, Coalesced: st.Replay.Coalesced, Misses: st.Replay.Misses,
			Messages: st.Replay.Messages, Channels: st.Replay.Channels, Bytes: st.Replay.Bytes},
		OriginsStale: e.Origins().Stale(), Origins: []edgeOriginStatus{}}
	if err := e.Ready(); err != nil {
		j.NotReady = err.Error()
	} else {
		j.Ready = true
	}
	for _, o := range e.Origins().List() {
		j.Origins = append(j.Origins, edgeOriginStatus{Addr: o.Addr(), InAnswer: o.InAnswer(), Sessions: o.Sessions(),
			Handshakes: o.Handshakes(), Ejected: o.Ejected(), Ejections: o.Ejections()})
	}
	sort.Slice(j.Origins, func(a, b int) bool { return j.Origins[a].Addr < j.Origins[b].Addr })
	return j
}

// edgeStatusPage is the edge's status page: readiness, sessions,
// admission, the replay cache and every origin with its load and
// ejection, reloading itself.
func edgeStatusPage(e *edge.Edge) http.Handler {
	return admin.StatusPage(admin.StatusPageConfig{
		Refresh: statusRefresh,
		JSON:    func() any { return edgeStatus(e) },
		HTML: func() admin.Status {
			j := edgeStatus(e)
			origins := admin.Table{Title: "origins", Columns: []string{"address", "in answer", "sessions", "handshakes", "state", "ejections"}}
			for _, o := range j.Origins {
				state := "serving"
				if o.Ejected {
					state = "ejected"
				}
				origins.Rows = append(origins.Rows, admin.Row{Bad: o.Ejected || !o.InAnswer, Cells: []string{o.Addr,
					strconv.FormatBool(o.InAnswer), strconv.FormatInt(o.Sessions, 10), strconv.FormatInt(o.Handshakes, 10), state, strconv.FormatUint(o.Ejections, 10)}})
			}
			r := j.Replay
			return admin.Status{
				Title:   "corral edge " + j.Node,
				Summary: readySummary(j.Ready, j.NotReady),
				Bad:     !j.Ready,
				Facts: []admin.Fact{
					{Name: "sessions", Value: strconv.Itoa(j.Sessions)},
					{Name: "shed stage", Value: j.Stage, Bad: j.Stage != "normal"},
					{Name: "handshake limit", Value: limitText(j.HandshakeLimit)},
					{Name: "message limit", Value: limitText(j.MessageLimit)},
					{Name: "replay cache", Value: fmt.Sprintf("%d hits, %d coalesced, %d misses; %d messages in %d channels, %d bytes", r.Hits, r.Coalesced, r.Misses, r.Messages, r.Channels, r.Bytes)},
					{Name: "origins", Value: fmt.Sprintf("%d, stale %v", len(j.Origins), j.OriginsStale), Bad: j.OriginsStale || len(j.Origins) == 0},
				},
				Tables: []admin.Table{origins},
			}
		},
	})
}

func readySummary(ready bool, why string) string {
	if ready {
		return "ready at " + time.Now().UTC().Format("2006-01-02 15:04:05Z")
	}
	return "not ready: " + why
}

func limitText(n int) string {
	if n == 0 {
		return "off"
	}
	return strconv.Itoa(n)
}
