package health

// View answers whether a named check is healthy, for callers that look
// checks up by name; implementations must be cheap and safe for concurrent
// use. The DNS answer path does not look names up: it resolves each
// record's check to a Ref when it builds a zone.
//
// Healthy reports false for a name the view does not know. A record that
// has no check is healthy by the caller's rule, not the view's: a caller
// (authdns, say) simply does not ask about records without a check, and
// checks its references against the configured check names (Config.Has
// does it for one name) so that an unknown name never reaches the view.
type View interface {
	Healthy(name string) bool
}

// Static is a View with fixed states, for tests:
// Static{"web-1": true, "web-2": false}. A missing name is
// unhealthy, as with every View. Reading it is safe for concurrent use;
// writing to the map while it is read is not.
type Static map[string]bool

// Healthy reports s[name].
func (s Static) Healthy(name string) bool { return s[name] }

var (
	_ View = Static(nil)
	_ View = (*Checker)(nil)
)
