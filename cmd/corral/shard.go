package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/report"
	"github.com/corralhq/corral/shard"
)

func newShardCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shard",
		Short: "Shuffle sharding: analyse a configuration, assign stored hands, print a tenant's hand",
		Long: `Shuffle sharding gives every tenant its own hand of k workers out of n, so
that one tenant's poison traffic reaches only its hand.

  corral shard analyze   exact figures: hands, overlap distribution, blast radius, capacity
  corral shard assign    stored hands with a maximum pairwise overlap
  corral shard hand      one tenant's hand (dealt, stable, lattice or stored) and its pick`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newShardAnalyzeCmd(g), newShardAssignCmd(g), newShardHandCmd(g))
	return cmd
}

func newShardAnalyzeCmd(g *globals) *cobra.Command {
	var cfg shard.AnalyzeConfig
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "analyze --workers N --hand K [--max-overlap T] [--zones Z]",
		Short: "Print the exact figures of n workers and hands of k",
		Long: `Print the exact figures of hands of k out of n workers: the number of hands,
entropy, the overlap distribution of two random hands, the blast radius of
one failed hand, the dealer's entropy budget, and with --max-overlap the
capacity bound of stored hands, with --zones those of a zone lattice.

--json prints the shard.Analysis object (fields documented in
shard/README.md): workers, hand_size, hands (exact decimal string),
entropy_bits, dealer_bits, dealer_ok, expected_overlap,
overlap [{members, probability, exact}], degraded_share, down_share,
stored {max_overlap, capacity, guaranteed_healthy, down_share} and
lattice {zones, zone_sizes, per_zone, hand_size, survivors_after_zone_loss,
hands, entropy_bits, expected_overlap, overlap, degraded_share, down_share}.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			a, err := shard.Analyze(cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return report.JSON(g.stdout, a)
			}
			return writeAnalysis(g.stdout, a)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Workers, "workers", 0, "n, the number of workers (required)")
	f.IntVar(&cfg.HandSize, "hand", 0, "k, the workers per hand (required)")
	f.IntVar(&cfg.MaxOverlap, "max-overlap", -1, "t: add the capacity figures of stored hands sharing at most t workers")
	f.IntVar(&cfg.Zones, "zones", 0, "add the figures of a zone lattice over this many zones")
	f.BoolVar(&asJSON, "json", false, "print as JSON (see above)")
	_ = cmd.MarkFlagRequired("workers")
	_ = cmd.MarkFlagRequired("hand")
	return cmd
}

// group writes a decimal integer with thousands separators.
func group(digits string) string {
	var b strings.Builder
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func pct(p float64) string {
	return strconv.FormatFloat(100*p, 'g', 6, 64) + " %"
}

func writeAnalysis(w io.Writer, a shard.Analysis) error {
	t := report.Table{Title: fmt.Sprintf("shuffle sharding: %d workers, hands of %d", a.Workers, a.HandSize), Header: []string{"figure", "value"}, Right: []int{1}}
	t.Add("hands C(n,k)", group(a.Hands))
	t.Add("entropy (bits)", fmt.Sprintf("%.2f", a.EntropyBits))
	dealer := "ok"
	if !a.DealerOK {
		dealer = fmt.Sprintf("beyond %d bits: dealer refuses", shard.MaxEntropyBits)
	}
	t.Add("dealer bits per ordered hand", fmt.Sprintf("%.2f (%s)", a.DealerBits, dealer))
	t.Add("expected overlap k²/n", strconv.FormatFloat(a.ExpectedOverlap, 'g', 6, 64))
	t.Add("one hand fails: tenants degraded", pct(a.DegradedShare))
	t.Add("one hand fails: tenants fully down", pct(a.DownShare))
	if s := a.Stored; s != nil {
		t.Add(fmt.Sprintf("capacity at max overlap %d", s.MaxOverlap), group(s.Capacity))
		t.Add("stored: workers every tenant keeps", s.GuaranteedHealthy)
		t.Add("stored: tenants fully down", pct(s.DownShare))
	}
	if err := t.Write(w); err != nil {
		return err
	}
	if err := writeOverlap(w, "\noverlap of two random hands", a.Overlap); err != nil {
		return err
	}
	if l := a.Lattice; l != nil {
		lt := report.Table{Title: fmt.Sprintf("\nzone lattice: %d zones of %v workers, %d per zone", l.Zones, l.ZoneSizes, l.PerZone), Header: []string{"figure", "value"}, Right: []int{1}}
		lt.Add("hand size", l.HandSize)
		lt.Add("members left after a zone loss", l.SurvivorsAfterZoneLoss)
		lt.Add("hands", group(l.Hands))
		lt.Add("entropy (bits)", fmt.Sprintf("%.2f", l.EntropyBits))
		lt.Add("expected overlap", strconv.FormatFloat(l.ExpectedOverlap, 'g', 6, 64))
		lt.Add("one hand fails: tenants degraded", pct(l.DegradedShare))
		lt.Add("one hand fails: tenants fully down", pct(l.DownShare))
		if err := lt.Write(w); err != nil {
			return err
		}
		return writeOverlap(w, "\noverlap of two random lattice hands", l.Overlap)
	}
	return nil
}

func writeOverlap(w io.Writer, title string, rows []shard.OverlapRow) error {
	t := report.Table{Title: title, Header: []string{"shared", "probability", "exact"}, Right: []int{0, 1}}
	for _, r := range rows {
		t.Add(r.Members, pct(r.Probability), r.Exact)
	}
	return t.Write(w)
}

// assignResult is what `corral shard assign --json` prints.
type assignResult struct {
	Workers    int    `json:"workers"`
	HandSize   int    `json:"hand_size"`
	MaxOverlap int    `json:"max_overlap"`
	Seed       uint64 `json:"seed"`
	Capacity   string `json:"capacity"`
	// Stored is the number of tenants with a hand after the run, and Store
	// the store file, if any.
	Stored int    `json:"stored"`
	Store  string `json:"store,omitempty"`
	// Tenants lists the hands of the tenants in the file, in file order.
	Tenants []tenantHand `json:"tenants,omitempty"`
}

type tenantHand struct {
	ID   string `json:"id"`
	Hand []int  `json:"hand"`
}

func newShardAssignCmd(g *globals) *cobra.Command {
	var cfg shard.AssignerConfig
	var tenants, store string
	var quiet, asJSON bool
	cmd := &cobra.Command{
		Use:   "assign --workers N --hand K --max-overlap T --tenants FILE [--store FILE]",
		Short: "Assign stored hands that pairwise share at most T workers",
		Long: `Assign every tenant of FILE (one id per line; blank lines and lines starting
with # are skipped; - reads stdin) a hand of K out of N workers such that no
two hands share more than T workers. The assignment is deterministic from
--seed and the order of the ids. With --store the hands are appended to
(and first loaded from) a checksummed file, so later runs keep earlier hands.
The request is checked against the capacity bound C(N,T+1)/C(K,T+1) first.

Prints one line per tenant (id and hand), or with --quiet only the summary.
--json prints {workers, hand_size, max_overlap, seed, capacity (exact
decimal string), stored (tenants with a hand after the run), store (the
file, if any), tenants [{id, hand}] (omitted with --quiet)}.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ids, err := readTenants(tenants)
			if err != nil {
				return err
			}
			cfg.ExpectedTenants = len(ids)
			if store != "" {
				st, err := shard.OpenFileStore(store)
				if err != nil {
					return err
				}
				cfg.Store = st
			}
			a, err := shard.NewAssigner(cfg)
			if err != nil {
				if cfg.Store != nil {
					_ = cfg.Store.Close()
				}
				return err
			}
			err = a.AssignAll(ids)
			if cerr := a.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			res := assignResult{Workers: cfg.Workers, HandSize: cfg.HandSize, MaxOverlap: cfg.MaxOverlap, Seed: cfg.Seed,
				Capacity: a.Capacity().String(), Stored: a.Len(), Store: store}
			if !quiet {
				for _, id := range ids {
					h, _ := a.Hand(nil, id)
					res.Tenants = append(res.Tenants, tenantHand{ID: id, Hand: h})
				}
			}
			if asJSON {
				return report.JSON(g.stdout, res)
			}
			return writeAssign(g.stdout, res, len(ids))
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Workers, "workers", 0, "n, the number of workers (required)")
	f.IntVar(&cfg.HandSize, "hand", 0, "k, the workers per hand (required)")
	f.IntVar(&cfg.MaxOverlap, "max-overlap", 0, "t, the most workers two hands may share (required)")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of the candidate hands")
	f.IntVar(&cfg.MaxAttempts, "max-attempts", 0, fmt.Sprintf("candidate hands tried per tenant (0: %d)", shard.DefaultMaxAttempts))
	f.StringVar(&tenants, "tenants", "", "file of tenant ids, one per line, or - for stdin (required)")
	f.StringVar(&store, "store", "", "append-only store file to load and extend")
	f.BoolVar(&quiet, "quiet", false, "print only the summary")
	f.BoolVar(&asJSON, "json", false, "print as JSON (see above)")
	for _, name := range []string{"workers", "hand", "max-overlap", "tenants"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func readTenants(path string) ([]string, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("shard: tenants: %w", err)
		}
		defer f.Close()
		r = f
	}
	var ids []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), shard.MaxTenantID+2)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ids = append(ids, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("shard: tenants %s: %w", path, err)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("shard: tenants %s: no tenant ids", path)
	}
	return ids, nil
}

func joinInts(xs []int) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}

func writeAssign(w io.Writer, res assignResult, requested int) error {
	bw := bufio.NewWriter(w)
	for _, t := range res.Tenants {
		fmt.Fprintf(bw, "%s\t%s\n", t.ID, joinInts(t.Hand))
	}
	where := "in memory"
	if res.Store != "" {
		where = "in " + res.Store
	}
	fmt.Fprintf(bw, "# %d tenants assigned, %d hands %s; capacity bound %s for %d workers, hands of %d, max overlap %d\n",
		requested, res.Stored, where, res.Capacity, res.Workers, res.HandSize, res.MaxOverlap)
	return bw.Flush()
}

// handResult is what `corral shard hand --json` prints.
type handResult struct {
	ID string `json:"id"`
	// Mode is "dealer", "stable", "lattice" or "stored".
	Mode string `json:"mode"`
	// Hand holds worker indices in preference order; WorkerIDs their names
	// for the stable and lattice modes.
	Hand      []int    `json:"hand"`
	WorkerIDs []string `json:"worker_ids,omitempty"`
	// Spill holds the dealer's spill workers.
	Spill []int `json:"spill,omitempty"`
	// Pick is the health-aware choice under --down.
	Pick *pickResult `json:"pick,omitempty"`
}

type pickResult struct {
	Workers []int  `json:"workers"`
	Status  string `json:"status"`
	Spilled int    `json:"spilled"`
}

func newShardHandCmd(g *globals) *cobra.Command {
	var (
		id, secretHex, workersFile, storePath, downList string
		n, k, spill, minHealthy, maxOverlap             int
		seed                                            uint64
		lattice, asJSON                                 bool
	)
	cmd := &cobra.Command{
		Use:   "hand --id X (--workers N --secret HEX | --workers-file FILE --secret HEX | --store FILE --workers N) --hand K",
		Short: "Print one tenant's hand and, with --down, its health-aware pick",
		Long: `Print the hand of tenant --id, as worker indices in preference order.

  dealer (default)  --workers N --hand K --secret HEX [--spill S]: the keyed stateless hand
  stable/lattice    --workers-file FILE --hand K --secret HEX [--lattice]: rendezvous hands over
                    named workers; FILE has one worker per line: "id [weight [zone]]"
  stored            --store FILE --workers N --hand K --max-overlap T --seed S: the stored hand

--down 3,17 marks workers down and adds the health-aware pick (healthy hand
members in order, spill to --spill extra workers below --min-healthy,
fail open to the hand when all are down).
--json prints {id, mode, hand, worker_ids (stable and lattice), spill
(dealer), pick {workers, status (healthy, spilled, degraded, fail-open),
spilled}}.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			down, err := parseDown(downList)
			if err != nil {
				return err
			}
			health := shard.HealthFunc(func(w int) bool { return !down[w] })
			res := handResult{ID: id}
			var spillWorkers []int
			switch {
			case storePath != "":
				res.Mode = "stored"
				st, err := shard.OpenFileStore(storePath)
				if err != nil {
					return err
				}
				a, err := shard.NewAssigner(shard.AssignerConfig{Workers: n, HandSize: k, MaxOverlap: maxOverlap, Seed: seed, Store: st})
				if err != nil {
					_ = st.Close()
					return err
				}
				h, ok := a.Hand(nil, id)
				if err := a.Close(); err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("shard: tenant %q has no hand in %s", id, storePath)
				}
				res.Hand = h
			case workersFile != "":
				res.Mode = "stable"
				if lattice {
					res.Mode = "lattice"
				}
				secret, err := shard.ParseSecret(secretHex)
				if err != nil {
					return err
				}
				ws, err := readWorkers(workersFile)
				if err != nil {
					return err
				}
				s, err := shard.NewStable(shard.StableConfig{Secret: secret, Workers: ws, HandSize: k, Zones: lattice})
				if err != nil {
					return err
				}
				res.Hand = s.Hand(nil, id)
				for _, i := range res.Hand {
					res.WorkerIDs = append(res.WorkerIDs, ws[i].ID)
				}
			default:
				res.Mode = "dealer"
				secret, err := shard.ParseSecret(secretHex)
				if err != nil {
					return err
				}
				d, err := shard.NewDealer(shard.DealerConfig{Secret: secret, Workers: n, HandSize: k, Spill: spill, MinHealthy: minHealthy})
				if err != nil {
					return err
				}
				res.Hand = d.Hand(nil, id)
				spillWorkers = d.Spill(nil, id)
				res.Spill = spillWorkers
			}
			if downList != "" {
				c := shard.PickFrom(nil, res.Hand, spillWorkers, minHealthy, health)
				res.Pick = &pickResult{Workers: c.Workers, Status: c.Status.String(), Spilled: c.Spilled}
			}
			if asJSON {
				return report.JSON(g.stdout, res)
			}
			t := report.Table{Title: fmt.Sprintf("tenant %q (%s)", id, res.Mode), Header: []string{"", "workers"}}
			t.Add("hand", joinInts(res.Hand))
			if res.WorkerIDs != nil {
				t.Add("ids", strings.Join(res.WorkerIDs, ","))
			}
			if len(res.Spill) > 0 {
				t.Add("spill", joinInts(res.Spill))
			}
			if p := res.Pick; p != nil {
				t.Add("pick", joinInts(p.Workers)+" ("+p.Status+")")
			}
			return t.Write(g.stdout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&id, "id", "", "tenant id (required)")
	f.IntVar(&n, "workers", 0, "n, the number of workers (dealer and stored modes)")
	f.IntVar(&k, "hand", 0, "k, the workers per hand (required)")
	f.StringVar(&secretHex, "secret", "", "the 32-hex-digit secret (dealer, stable and lattice modes)")
	f.IntVar(&spill, "spill", 0, "spill workers for the pick (dealer mode)")
	f.IntVar(&minHealthy, "min-healthy", 0, "healthy workers a pick wants before spilling (0: 1)")
	f.StringVar(&workersFile, "workers-file", "", `file of named workers, "id [weight [zone]]" per line (stable mode)`)
	f.BoolVar(&lattice, "lattice", false, "zone lattice: ceil(k/zones) workers from every zone (stable mode)")
	f.StringVar(&storePath, "store", "", "store file written by corral shard assign (stored mode)")
	f.IntVar(&maxOverlap, "max-overlap", 0, "t of the store (stored mode)")
	f.Uint64Var(&seed, "seed", 1, "seed of the store (stored mode)")
	f.StringVar(&downList, "down", "", "comma-separated worker indices that are down; adds the pick")
	f.BoolVar(&asJSON, "json", false, "print as JSON (see above)")
	_ = cmd.MarkFlagRequired("id")
	_ = cmd.MarkFlagRequired("hand")
	return cmd
}

func parseDown(list string) (map[int]bool, error) {
	down := map[int]bool{}
	if list == "" {
		return down, nil
	}
	for _, f := range strings.Split(list, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || w < 0 {
			return nil, fmt.Errorf("shard: --down: %q is not a worker index", f)
		}
		down[w] = true
	}
	return down, nil
}

// readWorkers reads "id [weight [zone]]" lines; blank lines and # comments
// are skipped.
func readWorkers(path string) ([]shard.Worker, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("shard: workers: %w", err)
	}
	var ws []shard.Worker
	for i, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if len(fields) > 3 {
			return nil, fmt.Errorf("shard: workers %s:%d: want \"id [weight [zone]]\", got %d fields", path, i+1, len(fields))
		}
		w := shard.Worker{ID: fields[0]}
		if len(fields) > 1 {
			if w.Weight, err = strconv.ParseFloat(fields[1], 64); err != nil {
				return nil, fmt.Errorf("shard: workers %s:%d: weight %q is not a number", path, i+1, fields[1])
			}
		}
		if len(fields) > 2 {
			w.Zone = fields[2]
		}
		ws = append(ws, w)
	}
	if len(ws) == 0 {
		return nil, errors.New("shard: workers " + path + ": no workers")
	}
	return ws, nil
}
