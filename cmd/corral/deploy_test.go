package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// deployRoot is the folder TestDeployFiles checks.
const deployRoot = "../../deploy"

// shutdownAfterDrain is what `corral hub` and `corral edge` give the
// process after drain.deadline (serveWithAdmin's grace), and corral dns
// its whole shutdown; graceMargin is the least a grace period must add.
const (
	shutdownAfterDrain = 5 * time.Second
	graceMargin        = 5 * time.Second
)

// deployFiles is every file under deploy/, parsed.
type deployFiles struct {
	objects []k8sObject         // Kubernetes objects, every document of every manifest
	units   map[string]unitFile // systemd units by file name
	configs map[string]string   // systemd/<part>.yaml by part: the file's path
	sysctl  map[string]string   // systemd/99-corral.conf
	env     map[string]string   // systemd/secrets.env.example
	nats    map[string]any      // kubernetes/common/nats-values.yaml
	exprs   []promExpr          // every PromQL expression of a dashboard or an alert
	texts   map[string]string   // every file's text, by path under deploy/
}

type k8sObject struct {
	file string
	doc  map[string]any
}

// unitFile is a systemd unit: section -> key -> values (keys repeat).
type unitFile map[string]map[string][]string

type promExpr struct{ file, where, expr string }

// TestDeployFiles parses every file under deploy/ (YAML documents, systemd
// units, sysctl.d, the environment example, Grafana JSON, Prometheus rules;
// any other kind of file fails it) and checks them against the code: each
// config passes its server's validation, each flag is in `corral <part>
// --help`, each port, probe and Service target matches the config it
// serves, every grace period covers the drain, the host settings meet
// internal/hostcheck's table, and every metric a dashboard or an alert
// names is in /metrics of a hub, an edge and a DNS server started from the
// Kubernetes configs and given a session, a publish and a query.
func TestDeployFiles(t *testing.T) {
	d := readDeploy(t)
	help := map[string]string{}
	for _, part := range []string{"hub", "edge", "dns"} {
		code, out, errOut := corral(t, part, "--help")
		if code != 0 {
			t.Fatalf("corral %s --help: exit %d: %s", part, code, errOut)
		}
		help[part] = out
	}
	t.Run("kubernetes", func(t *testing.T) { checkKubernetes(t, d, help) })
	t.Run("systemd", func(t *testing.T) { checkSystemd(t, d, help) })
	t.Run("metrics", func(t *testing.T) {
		names := scrapeDeployed(t, d)
		checkMetricNames(t, d.exprs, names)
	})
}

func readDeploy(t *testing.T) *deployFiles {
	t.Helper()
	d := &deployFiles{units: map[string]unitFile{}, configs: map[string]string{}, texts: map[string]string{}}
	err := filepath.WalkDir(deployRoot, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(deployRoot, path)
		rel = filepath.ToSlash(rel)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		d.texts[rel] = string(b)
		base := filepath.Base(rel)
		switch {
		case strings.HasSuffix(rel, ".md"):
		case rel == "kubernetes/common/nats-values.yaml":
			if err := yaml.Unmarshal(b, &d.nats); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		case strings.HasPrefix(rel, "kubernetes/") && strings.HasSuffix(rel, ".yaml"):
			docs, err := yamlDocs(b)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			for _, doc := range docs {
				if doc["apiVersion"] == nil || doc["kind"] == nil {
					return fmt.Errorf("%s: a document without apiVersion and kind", rel)
				}
				d.objects = append(d.objects, k8sObject{file: rel, doc: doc})
			}
		case strings.HasPrefix(rel, "systemd/") && (strings.HasSuffix(rel, ".service") || strings.HasSuffix(rel, ".timer")):
			u, err := parseUnit(b)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			d.units[base] = u
		case strings.HasPrefix(rel, "systemd/") && strings.HasSuffix(rel, ".yaml"):
			d.configs[strings.TrimSuffix(base, ".yaml")] = path
		case rel == "systemd/99-corral.conf":
			if d.sysctl, err = parseAssignments(b, " = "); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		case rel == "systemd/secrets.env.example":
			if d.env, err = parseAssignments(b, "="); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		case strings.HasPrefix(rel, "grafana/") && strings.HasSuffix(rel, ".json"):
			exprs, err := dashboardExprs(rel, b)
			if err != nil {
				return err
			}
			d.exprs = append(d.exprs, exprs...)
		case strings.HasPrefix(rel, "prometheus/") && strings.HasSuffix(rel, ".yaml"):
			exprs, err := ruleExprs(rel, b)
			if err != nil {
				return err
			}
			d.exprs = append(d.exprs, exprs...)
		default:
			return fmt.Errorf("%s: the deploy test does not know how to check this file", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.objects) == 0 || len(d.units) == 0 || len(d.exprs) == 0 || d.nats == nil || d.sysctl == nil || d.env == nil {
		t.Fatalf("deploy/ lacks a kind of file: %d objects, %d units, %d expressions", len(d.objects), len(d.units), len(d.exprs))
	}
	return d
}

// yamlDocs decodes every document of a multi-document YAML file.
func yamlDocs(b []byte) ([]map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if doc != nil {
			out = append(out, doc)
		}
	}
}

// parseUnit reads a systemd unit file: [Section] lines, Key=Value lines,
// comments; a line that is none of these is an error.
func parseUnit(b []byte) (unitFile, error) {
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("line %d: %q is not Key=Value in a section", n, line)
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return u, sc.Err()
}

// parseAssignments reads KEY<sep>VALUE lines and comments.
func parseAssignments(b []byte, sep string) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, sep)
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not KEY%sVALUE", n, line, sep)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, sc.Err()
}

// dashboardExprs returns every target expression of a Grafana dashboard,
// panels inside rows included.
func dashboardExprs(file string, b []byte) ([]promExpr, error) {
	var dash struct {
		Title  string            `json:"title"`
		UID    string            `json:"uid"`
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		return nil, fmt.Errorf("%s: a dashboard needs a title, a uid and panels", file)
	}
	var out []promExpr
	var walk func(raw []json.RawMessage) error
	walk = func(raw []json.RawMessage) error {
		for _, r := range raw {
			var p struct {
				Title   string            `json:"title"`
				Type    string            `json:"type"`
				Panels  []json.RawMessage `json:"panels"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			}
			if err := json.Unmarshal(r, &p); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				return fmt.Errorf("%s: panel %q has no query", file, p.Title)
			}
			for _, tg := range p.Targets {
				out = append(out, promExpr{file: file, where: "panel " + p.Title, expr: tg.Expr})
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(dash.Panels)
}

// ruleExprs returns every expression of a Prometheus rule file.
func ruleExprs(file string, b []byte) ([]promExpr, error) {
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var out []promExpr
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" {
				return nil, fmt.Errorf("%s: group %s: a rule needs alert and expr", file, g.Name)
			}
			out = append(out, promExpr{file: file, where: "alert " + r.Alert, expr: r.Expr})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no rules", file)
	}
	return out, nil
}

// metricToken finds the metric names an expression uses: the exported
// families are corral_*, go_* and process_*.
var metricToken = regexp.MustCompile(`\b(?:corral|go|process)_[a-zA-Z0-9_]+\b`)

func checkMetricNames(t *testing.T, exprs []promExpr, names map[string]bool) {
	used := 0
	for _, e := range exprs {
		toks := metricToken.FindAllString(e.expr, -1)
		if len(toks) == 0 {
			t.Errorf("%s: %s: %q names no corral metric", e.file, e.where, e.expr)
		}
		for _, m := range toks {
			used++
			if !names[m] {
				t.Errorf("%s: %s: metric %s is not exported by a hub, an edge or a DNS server (%q)", e.file, e.where, m, e.expr)
			}
		}
	}
	if used == 0 {
		t.Error("no metric named by any dashboard or alert")
	}
}
