package admin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestIndex: the root of an admin listener lists every page, the built-in
// ones and those a server adds, as HTML links and as JSON; any other
// unknown path is still a 404.
func TestIndex(t *testing.T) {
	s := New(Config{Addr: "127.0.0.1:0"}, Options{Title: "corral hub hub-7"})
	s.Page("GET /status", "this hub's state", http.NotFoundHandler())
	s.Handle("/extra", http.NotFoundHandler())
	s.Handle("POST /control/", http.NotFoundHandler())
	serve := func(target string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		s.mux.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		return w
	}
	w := serve("/")
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	body := w.Body.String()
	for _, want := range []string{
		"<h1>corral hub hub-7</h1>", `href="/metrics"`, `href="/healthz"`, `href="/readyz"`, `href="/debug/pprof/"`,
		`href="/status"`, "this hub&#39;s state", `href="/extra"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("index lacks %s:\n%s", want, body)
		}
	}
	var j struct {
		Title string `json:"title"`
		Pages []struct{ Path, About string }
	}
	if err := json.Unmarshal(serve("/?format=json").Body.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	if j.Title != "corral hub hub-7" || len(j.Pages) != 6 || j.Pages[0].Path != "/metrics" || j.Pages[4].Path != "/status" {
		t.Errorf("index JSON %+v", j)
	}
	if strings.Contains(body, "/control/") {
		t.Error("the index lists a POST-only pattern")
	}
	if w := serve("/nosuch"); w.Code != http.StatusNotFound {
		t.Errorf("GET /nosuch: %d, want 404", w.Code)
	}
}

// TestStatusPage: a status page reloads itself at its refresh, escapes
// what it shows, marks what is bad, and serves JSON on request.
func TestStatusPage(t *testing.T) {
	build := func() Status {
		return Status{Title: "corral edge e-1", Summary: "not ready: <origins>", Bad: true,
			Facts:  []Fact{{Name: "sessions", Value: "12"}, {Name: "shed stage", Value: "reject-p2", Bad: true}},
			Tables: []Table{{Title: "origins", Columns: []string{"address", "state"}, Rows: []Row{{Cells: []string{"10.0.0.1:7401", "ejected"}, Bad: true}}}}}
	}
	h := StatusPage(StatusPageConfig{HTML: build, Refresh: 2 * time.Second})
	serve := func(h http.Handler, target, accept string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", target, nil)
		r.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	body := serve(h, "/status", "text/html").Body.String()
	for _, want := range []string{
		`<meta http-equiv="refresh" content="2">`, "<title>corral edge e-1</title>", `<p class="bad">not ready: &lt;origins&gt;</p>`,
		"<th>sessions</th><td>12</td>", `<td class="bad">reject-p2</td>`, "<th>address</th><th>state</th>",
		`<tr class="bad"><td>10.0.0.1:7401</td><td>ejected</td></tr>`, `<a href="/">index</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<origins>") {
		t.Error("the summary is not escaped")
	}
	// JSON: the Status itself without a JSON builder, the builder's value with one.
	var st Status
	if err := json.Unmarshal(serve(h, "/status", "application/json").Body.Bytes(), &st); err != nil || st.Facts[1].Value != "reject-p2" {
		t.Errorf("JSON form: %v %+v", err, st)
	}
	hj := StatusPage(StatusPageConfig{HTML: build, JSON: func() any { return map[string]int{"sessions": 12} }, Refresh: -1})
	if got := serve(hj, "/status?format=json", "").Body.String(); strings.TrimSpace(got) != "{\n  \"sessions\": 12\n}" {
		t.Errorf("JSON builder's form: %q", got)
	}
	if body := serve(hj, "/status", "").Body.String(); strings.Contains(body, "refresh") {
		t.Error("a page with a negative refresh reloads itself")
	}
	if body := serve(StatusPage(StatusPageConfig{HTML: build}), "/status", "").Body.String(); !strings.Contains(body, `content="5"`) {
		t.Error("the default refresh is not 5 s")
	}
}
