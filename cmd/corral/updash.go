package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/fleet"
	"github.com/corralhq/corral/internal/admin"
)

// upState is the JSON of GET /api/state and of every event of
// /api/events: the fleet's Stats (each part's own metrics) and the storm.
type upState struct {
	fleet.Stats
	// Storm is the running or last storm; null before the first.
	Storm *StormView `json:"storm"`
}

// routes adds the dashboard and its API to the dashboard listener.
func (u *up) routes(s *admin.Server) {
	s.Page("GET /dashboard", "the live dashboard: charts and controls", http.HandlerFunc(u.servePage))
	s.Page("GET /api/state", "the fleet's state now (JSON, README.md)", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, u.state())
	}))
	s.Page("GET /api/events", "the state every period, as server-sent events", http.HandlerFunc(u.serveEvents))
	s.Page("GET /api/scenarios", "the scenario files a storm can run", http.HandlerFunc(u.serveScenarios))
	s.Page("GET /assets/", "the dashboard's scripts and styles", assets())
	s.Handle("POST /api/policy", http.HandlerFunc(u.postPolicy))
	s.Handle("POST /api/hubs/{hub}/{action}", http.HandlerFunc(u.postHub))
	s.Handle("POST /api/drop", http.HandlerFunc(u.postDrop))
	s.Handle("POST /api/storm", http.HandlerFunc(u.postStorm))
	s.Handle("DELETE /api/storm", http.HandlerFunc(u.deleteStorm))
	s.Handle("/api/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("up: no API %s %s (README.md lists them)", r.Method, r.URL.Path))
	}))
}

func (u *up) state() upState { return upState{Stats: u.fleet.Stats(), Storm: u.storm.view()} }

// serveEvents streams the state as server-sent events, one "data:" line
// of JSON every --every, until the client goes or up stops.
func (u *up) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	t := time.NewTicker(u.every)
	defer t.Stop()
	for {
		b, err := json.Marshal(u.state())
		if err != nil {
			return
		}
		// The listener's write timeout bounds a whole response; a stream
		// extends it before each event.
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-u.done:
			return
		case <-t.C:
		}
	}
}

// serveScenarios lists the scenario files under ./scenarios, for the
// storm control's list.
func (u *up) serveScenarios(w http.ResponseWriter, _ *http.Request) {
	files, _ := filepath.Glob(filepath.Join("scenarios", "*.yaml"))
	writeJSON(w, http.StatusOK, map[string][]string{"scenarios": append([]string{}, files...)})
}

// maxBody bounds a control's request body.
const maxBody = 4 << 10

// decodeBody reads r's JSON body into v, refusing unknown fields.
func decodeBody(r *http.Request, v any) error {
	d := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("up: request body: %v", err)
	}
	if d.More() {
		return errors.New("up: request body: more than one JSON value")
	}
	return nil
}

// postPolicy switches the origin record's policy: {"policy": "weighted"}.
func (u *up) postPolicy(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Policy *string `json:"policy"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if req.Policy == nil {
		writeError(w, http.StatusBadRequest, errors.New(`up: policy: missing (want {"policy": "`+strings.Join(fleet.Switchable, `" | "`)+`"})`))
		return
	}
	if err := u.fleet.SetPolicy(*req.Policy); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	u.log.Info("policy switched", "policy", *req.Policy)
	writeJSON(w, http.StatusOK, map[string]string{"policy": u.fleet.Policy()})
}

// postHub kills, pauses or resumes hub N (1 is hub-1).
func (u *up) postHub(w http.ResponseWriter, r *http.Request) {
	hubs := len(u.fleet.Hubs())
	n, err := strconv.Atoi(r.PathValue("hub"))
	if err != nil || n < 1 || n > hubs {
		writeError(w, http.StatusNotFound, fmt.Errorf("up: hub %q: want 1 to %d", r.PathValue("hub"), hubs))
		return
	}
	i := n - 1
	state, _ := u.fleet.HubState(i)
	action := r.PathValue("action")
	switch {
	case action != "kill" && action != "pause" && action != "resume":
		writeError(w, http.StatusNotFound, fmt.Errorf("up: hub action %q: want kill, pause or resume", action))
		return
	case state == "killed":
		writeError(w, http.StatusConflict, fmt.Errorf("up: hub-%d is killed", n))
		return
	case action == "kill":
		err = u.fleet.KillHub(i)
	case action == "pause":
		err = u.fleet.PauseHub(i)
	default:
		err = u.fleet.ResumeHub(i)
	}
	if err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	state, _ = u.fleet.HubState(i)
	u.log.Info("hub "+action, "hub", n)
	writeJSON(w, http.StatusOK, map[string]string{"hub": "hub-" + strconv.Itoa(n), "state": state})
}

// postDrop cuts a share of the edges' sessions: {"percent": 30}.
func (u *up) postDrop(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Percent *float64 `json:"percent"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if req.Percent == nil || math.IsNaN(*req.Percent) || *req.Percent <= 0 || *req.Percent > 100 {
		writeError(w, http.StatusBadRequest, errors.New(`up: percent: want a number above 0 and at most 100 ({"percent": 30})`))
		return
	}
	n, err := u.fleet.DropSessions(*req.Percent / 100)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	u.log.Info("sessions dropped", "percent", *req.Percent, "dropped", n)
	writeJSON(w, http.StatusOK, map[string]int{"dropped": n})
}

// postStorm starts a storm: {"scenario": "scenarios/kraken-drop.yaml"}.
func (u *up) postStorm(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Scenario string `json:"scenario"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if req.Scenario == "" {
		writeError(w, http.StatusBadRequest, errors.New(`up: scenario: missing (want {"scenario": "scenarios/NAME.yaml"})`))
		return
	}
	if err := u.storm.start(u, req.Scenario); err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, errStormRunning) {
			code = http.StatusConflict
		}
		writeError(w, code, err)
		return
	}
	writeJSON(w, http.StatusOK, u.storm.view())
}

// deleteStorm stops the running storm.
func (u *up) deleteStorm(w http.ResponseWriter, _ *http.Request) {
	if !u.storm.stop() {
		writeError(w, http.StatusConflict, errors.New("up: no storm is running"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"stopping": true})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers {"error": "..."} with code.
func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
