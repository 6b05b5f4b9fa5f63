package fdcount

import (
	"os"
	"testing"
)

// TestOpen: the count follows descriptors opened and closed, and matches
// the listing os.ReadDir gives (less its own descriptor).
func TestOpen(t *testing.T) {
	base, ok := Open()
	if !ok || base < 3 {
		t.Fatalf("Open() = %d, %v; want stdin, stdout, stderr at least", base, ok)
	}
	var files []*os.File
	for range 2500 { // more entries than one read of the listing returns
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	n, _ := Open()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	if n != base+len(files) || n != len(ents)-1 {
		t.Errorf("Open() = %d with %d more files open, want %d (os.ReadDir lists %d, its own included)", n, len(files), base+len(files), len(ents))
	}
	for _, f := range files {
		_ = f.Close()
	}
	if n, _ := Open(); n != base {
		t.Errorf("Open() = %d after closing them, want %d", n, base)
	}
}

// BenchmarkOpen: counting 19,000 descriptors, with Open and with
// os.ReadDir (what the servers called before).
//
//	go test -run '^$' -bench Open -benchtime 20x ./internal/fdcount
func BenchmarkOpen(b *testing.B) {
	var files []*os.File
	for range 19000 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			b.Skipf("opening descriptors: %v", err)
		}
		files = append(files, f)
	}
	b.Cleanup(func() {
		for _, f := range files {
			_ = f.Close()
		}
	})
	b.Run("Open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := Open(); !ok {
				b.Fatal("no count")
			}
		}
	})
	b.Run("os.ReadDir", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := os.ReadDir("/proc/self/fd"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
