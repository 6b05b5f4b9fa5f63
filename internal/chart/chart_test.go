package chart

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func good() Chart {
	return Chart{
		Title:  "Devices connected",
		YLabel: "devices",
		Times:  []float64{0, 1, 2},
		Series: []Series{{Name: "all", Values: []float64{0, 1.1e8, 1.21e8}}, {Name: "P0", Values: []float64{0, 1e7, 1.2e7}}},
	}
}

func TestValidateRefusesBadData(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Chart)
		want   string
	}{
		{"NaN value", func(c *Chart) { c.Series[1].Values[2] = math.NaN() }, `chart: chart "Devices connected": series "P0": value 2 (at time 2) is NaN`},
		{"infinite value", func(c *Chart) { c.Series[0].Values[1] = math.Inf(1) }, `series "all": value 1 (at time 1) is +Inf`},
		{"short series", func(c *Chart) { c.Series[1].Values = c.Series[1].Values[:2] }, `series "P0" has 2 values for 3 times`},
		{"long series", func(c *Chart) { c.Series[0].Values = append(c.Series[0].Values, 1) }, `series "all" has 4 values for 3 times`},
		{"no series", func(c *Chart) { c.Series = nil }, `chart "Devices connected" has no series`},
		{"unnamed series", func(c *Chart) { c.Series[1].Name = "" }, `series 2 has no name`},
		{"times not increasing", func(c *Chart) { c.Times[2] = 1 }, `times must increase, time 2 (1) follows 1`},
		{"NaN time", func(c *Chart) { c.Times[0] = math.NaN() }, `time 0 is NaN`},
		{"reversed view", func(c *Chart) { c.View = [2]float64{5, 1} }, `view 5 to 1 is not a time range`},
		{"negative height", func(c *Chart) { c.Height = -1 }, `height -1 is negative`},
		{"missing marks of the wrong length", func(c *Chart) { c.Series[0].Missing = []bool{true} }, `series "all" marks 1 points missing for 3 times`},
		{"untitled", func(c *Chart) { c.Title = ""; c.Series = nil }, `chart "untitled" has no series`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.change(&c)
			err := c.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), "chart: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v, want an error with %q", err, tt.want)
			}
			if _, err := Encode(c); err == nil {
				t.Error("Encode accepted the chart")
			}
			if _, err := Render(c); err == nil {
				t.Error("Render accepted the chart")
			}
			if err := WritePage(io.Discard, Page{Charts: []Chart{good(), c}}); err == nil {
				t.Error("WritePage accepted the chart")
			}
		})
	}
	c := good()
	if err := c.Validate(); err != nil {
		t.Fatalf("good chart: %v", err)
	}
	empty := Chart{Series: []Series{{Name: "a"}}}
	if err := empty.Validate(); err != nil {
		t.Errorf("an empty chart (for a live page) is valid: %v", err)
	}
}

func TestEncode(t *testing.T) {
	c := good()
	c.Unit = "/s"
	c.View = [2]float64{1, 2}
	c.Series[0].Values[1] = 1.234567891e8
	got, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"spec":{"title":"Devices connected","yLabel":"devices","unit":"/s","format":"si","time":"seconds","series":["all","P0"],"view":[1,2]},` +
		`"data":[[0,1,2],[0,1.23457e+08,1.21e+08],[0,1e+07,1.2e+07]]}`
	if string(got) != want {
		t.Errorf("Encode:\n got %s\nwant %s", got, want)
	}
	c = good()
	c.Series = c.Series[:1]
	c.Series[0].Values[1] = math.NaN()
	c.Series[0].Missing = []bool{false, true, false}
	got, err = Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"data":[[0,1,2],[0,null,1.21e+08]]}`; !strings.HasSuffix(string(got), want) {
		t.Errorf("Encode with a missing point: %s, want it to end with %s", got, want)
	}
	c = Chart{Format: Percent, Unit: "ignored", Axis: Clock, Times: []float64{1764600000.5}, Series: []Series{{Name: "5xx", Values: []float64{0.38}}}}
	got, err = Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	want = `{"spec":{"format":"percent","time":"clock","series":["5xx"]},"data":[[1764600000.5],[0.38]]}`
	if string(got) != want {
		t.Errorf("Encode percent, clock:\n got %s\nwant %s", got, want)
	}
}

func TestRenderKeepsNamesInsideTheScript(t *testing.T) {
	c := good()
	c.Title = "</script><b>x</b>"
	c.Series[0].Name = "a<!--b"
	h, err := Render(c)
	if err != nil {
		t.Fatal(err)
	}
	s := string(h)
	if strings.Count(s, "</script>") != 1 || strings.Contains(s, "<b>") || strings.Contains(s, "<!--") {
		t.Errorf("a name escaped its script element: %s", s)
	}
}

func TestWritePageIsSelfContained(t *testing.T) {
	var b bytes.Buffer
	if err := WritePage(&b, Page{Title: "t <1>", Intro: "<p>verdict</p>", Charts: []Chart{good()}}); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, bad := range []string{" src=", " href=", "http://", "https://cdn"} {
		if strings.Contains(s, bad) {
			t.Errorf("page refers to an outside file (%q)", bad)
		}
	}
	for _, want := range []string{"<title>t &lt;1&gt;</title>", "<p>verdict</p>", "uPlot (v1.6.32)", "window.corralChart", `<figure class="corral-chart">`, "Copyright (c) 2022 Leon Sorokin"} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestHandlerServesAssets(t *testing.T) {
	srv := httptest.NewServer(http.StripPrefix("/static/chart/", Handler()))
	defer srv.Close()
	for name, want := range map[string]string{
		"uPlot.iife.min.js": "var uPlot=",
		"uPlot.min.css":     ".uplot",
		"chart.js":          "window.corralChart",
		"chart.css":         "figure.corral-chart",
		"LICENSE.uPlot":     "MIT",
	} {
		resp, err := http.Get(srv.URL + "/static/chart/" + name)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d, body without %q", name, resp.StatusCode, want)
		}
	}
	links := string(Links("/static/chart"))
	for _, name := range []string{"uPlot.iife.min.js", "uPlot.min.css", "chart.js", "chart.css"} {
		if !strings.Contains(links, `"/static/chart/`+name+`"`) {
			t.Errorf("Links lacks %s: %s", name, links)
		}
	}
}
