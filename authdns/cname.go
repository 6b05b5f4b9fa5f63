package authdns

import (
	"fmt"
	"strings"

	"github.com/corralhq/corral/internal/config"
)

// checkCNAMELoops refuses CNAME chains that come back to a name they
// passed, inside one zone or across the zones of zs, wildcards included:
// such a chain answers the same records again and again until the hop
// bound. It returns one error per loop, at the first CNAME of the loop in
// the configuration, naming every name of it.
func (zs *zoneSet) checkCNAMELoops(origins []string) []error {
	// An edge goes from a CNAME node to the CNAME node one of its targets
	// resolves to, exactly or through a wildcard, as a query would.
	var wild [maxName + 2]byte
	next := func(n *node) []*node {
		set := n.set(typeCNAME)
		if set == nil {
			return nil
		}
		var out []*node
		for _, t := range set.targets {
			z, zoff := zs.find(t)
			if z == nil {
				continue
			}
			if m, _ := z.match(t, zoff, &wild); m != nil && m.set(typeCNAME) != nil {
				out = append(out, m)
			}
		}
		return out
	}
	const (
		unseen = iota
		onPath
		done
	)
	color := map[*node]int{}
	var path []*node
	var errs []error
	var visit func(n *node)
	visit = func(n *node) {
		color[n] = onPath
		path = append(path, n)
		for _, m := range next(n) {
			switch color[m] {
			case unseen:
				visit(m)
			case onPath:
				i := len(path) - 1
				for path[i] != m {
					i--
				}
				names := make([]string, 0, len(path)-i+1)
				for _, p := range path[i:] {
					names = append(names, presentation(p.name))
				}
				names = append(names, presentation(m.name))
				src := m.set(typeCNAME).src
				errs = append(errs, config.Errorf(src, "authdns: CNAME loop: %s (a chain must end at a name that is not a CNAME, or outside the served zones)", strings.Join(names, " -> ")))
			}
		}
		path = path[:len(path)-1]
		color[n] = done
	}
	// Visit in configuration order, so errors come in file order.
	for _, origin := range origins {
		z := zs.zones[origin]
		if z == nil {
			continue
		}
		for _, n := range z.order {
			if color[n] == unseen && n.set(typeCNAME) != nil {
				visit(n)
			}
		}
	}
	return errs
}

// recordPath is the config path of a record set, for load errors.
func recordPath(zone, record int) string { return fmt.Sprintf("zones[%d].records[%d]", zone, record) }
