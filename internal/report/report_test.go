package report

import (
	"bytes"
	"testing"
)

func TestTableAligns(t *testing.T) {
	tb := Table{Title: "hands", Header: []string{"name", "value"}, Right: []int{1}}
	tb.Add("hands", 28)
	tb.Add("P(overlap=0)", "53.6 %")
	var buf bytes.Buffer
	if err := tb.Write(&buf); err != nil {
		t.Fatal(err)
	}
	want := "hands\n" +
		"name           value\n" +
		"------------  ------\n" +
		"hands             28\n" +
		"P(overlap=0)  53.6 %\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := JSON(&buf, map[string]int{"hands": 28}); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "{\n  \"hands\": 28\n}\n" {
		t.Errorf("got %q", buf.String())
	}
}
