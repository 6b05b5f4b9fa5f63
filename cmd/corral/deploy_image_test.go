package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// distrolessNonroot is the user id of the runtime image's nonroot user
// (gcr.io/distroless/static-debian12:nonroot runs as 65532).
const distrolessNonroot = 65532

// TestDeployImage holds the Kubernetes manifests to the Dockerfile that
// builds the image they name: every corral container names the image the
// Dockerfile says it builds, runs as the user the image runs as, and its
// arguments start with a subcommand (the image's entrypoint is the binary,
// and it has no shell for a command to run in).
func TestDeployImage(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	tag := regexp.MustCompile(`docker build -t (\S+) \.`).FindStringSubmatch(df)
	if tag == nil {
		t.Fatal("the Dockerfile does not say which image it builds (docker build -t NAME .)")
	}
	for _, want := range []string{"gcr.io/distroless/static-debian12:nonroot", "USER nonroot", `ENTRYPOINT ["/usr/local/bin/corral"]`, "CGO_ENABLED=0 go build", "./cmd/corral"} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile has no %q", want)
		}
	}
	repo, _, _ := strings.Cut(tag[1], ":")
	d := readDeploy(t)
	seen := 0
	for _, o := range d.objects {
		spec := m(dig(o.doc, "spec", "template", "spec"))
		for _, c := range l(spec["containers"]) {
			img := s(m(c)["image"])
			if !strings.Contains(img, "corral") || strings.HasPrefix(img, "nats") {
				continue
			}
			seen++
			where := o.file + ": " + s(dig(o.doc, "metadata", "name")) + "/" + s(m(c)["name"])
			if name, _, _ := strings.Cut(img, ":"); name != repo {
				t.Errorf("%s: image %s, but the Dockerfile builds %s", where, img, repo)
			}
			if m(c)["command"] != nil {
				t.Errorf("%s: a command replaces the image's entrypoint (the binary) and the image has no shell", where)
			}
			if args := l(m(c)["args"]); len(args) == 0 || !map[string]bool{"hub": true, "edge": true, "dns": true}[s(args[0])] {
				t.Errorf("%s: args %v do not start with a corral subcommand", where, args)
			}
			uid := n(dig(m(c), "securityContext", "runAsUser"))
			if uid < 0 { // not set on the container: the pod's
				uid = n(dig(spec, "securityContext", "runAsUser"))
			}
			if uid != distrolessNonroot {
				t.Errorf("%s: runs as user %d; the image's user is nonroot (%d)", where, uid, distrolessNonroot)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no corral container in deploy/kubernetes")
	}
}
