package kraken

import (
	"encoding/json"
	"time"
)

// The coordinator of a split run and its agents talk over NATS subjects
// (kraken/README.md, "Several agents"): an agent asks to join on
// kraken.join (any run waiting for agents) or kraken.RUN.join and is
// answered with its assignment; the coordinator's orders go to every agent
// on kraken.RUN.ctl; agents report on kraken.RUN.status; the publishing
// agent tells the others the P0 offsets the hub acknowledged on
// kraken.RUN.p0. Every message is JSON.
const subjectJoinAny = "kraken.join"

func subjectJoin(run string) string   { return "kraken." + run + ".join" }
func subjectCtl(run string) string    { return "kraken." + run + ".ctl" }
func subjectStatus(run string) string { return "kraken." + run + ".status" }
func subjectP0(run string) string     { return "kraken." + run + ".p0" }

// joinRequest is an agent asking for a part of a run.
type joinRequest struct {
	Name       string `json:"name"` // host:pid unless named
	PID        int    `json:"pid"`
	MaxDevices int    `json:"max_devices"` // what its file limit holds
}

// assignment is the answer to a joinRequest: the part of the run the
// agent drives and all it needs to drive it, or why it was refused.
type assignment struct {
	Refused string `json:"refused,omitempty"`

	Run    string `json:"run"`
	Agent  int    `json:"agent"`
	Agents int    `json:"agents"`
	// File and Scenario are the scenario file's name and bytes: the agent
	// decodes the file the coordinator checked.
	File       string              `json:"file"`
	Scenario   []byte              `json:"scenario"`
	Targets    []string            `json:"targets"`
	Regions    map[string][]string `json:"regions,omitempty"`
	Resolver   string              `json:"resolver,omitempty"`
	PublishURL string              `json:"publish_url,omitempty"`
	APIKey     string              `json:"api_key,omitempty"`
	Tokens     [][3]string         `json:"tokens"`       // by tenant, then priority rank
	CA         []byte              `json:"ca,omitempty"` // Config.CAFile's PEM
	Sources    string              `json:"sources"`
	Pollers    int                 `json:"pollers"`
	Every      time.Duration       `json:"every"`
	Settle     time.Duration       `json:"settle"`
	// Silence is how long either side waits without a message before it
	// counts the other as dead.
	Silence time.Duration `json:"silence"`
}

// Orders of the coordinator (ctlMsg.Kind).
const (
	ctlGo    = "go"    // every agent is ready: start the warm-up
	ctlStart = "start" // every agent is warm: the scenario's clock starts
	ctlStop  = "stop"  // a stop condition holds over the run (Reason)
	ctlAbort = "abort" // the run failed (Reason): stop at once
	ctlTick  = "tick"  // the coordinator is alive
)

type ctlMsg struct {
	Kind   string `json:"kind"`
	Reason string `json:"reason,omitempty"`
}

// Reports of an agent (statusMsg.Kind).
const (
	stReady  = "ready"  // its part is checked and its tokens in hand
	stFailed = "failed" // it cannot run its part (Error)
	stWarm   = "warm"   // its initial devices are held (or its warm-up ended)
	stStatus = "status" // periodic counts
	stResult = "result" // its Result
)

type statusMsg struct {
	Agent      int             `json:"agent"`
	Kind       string          `json:"kind"`
	Error      string          `json:"error,omitempty"`
	Held       int64           `json:"held"`
	Attempts   int64           `json:"attempts"`
	Failures   int64           `json:"failures"`
	Recovering int64           `json:"recovering"`
	Published  int64           `json:"published"`
	Delivered  int64           `json:"delivered"`
	Recovered  bool            `json:"recovered"`
	Result     json.RawMessage `json:"result,omitempty"`
}

// p0Msg is one acknowledged P0 offset, or the publishing agent's last
// word: Done with the count of offsets it sent.
type p0Msg struct {
	Key    string `json:"key,omitempty"`
	Epoch  string `json:"epoch,omitempty"`
	Offset uint64 `json:"offset,omitempty"`
	Done   bool   `json:"done,omitempty"`
	Count  int64  `json:"count,omitempty"`
}
