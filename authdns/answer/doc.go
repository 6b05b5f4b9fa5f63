// Package answer is the answer selection of corral's authoritative DNS: given
// the records of a name with their health (each record's Probe, resolved
// when the set is built, so that a query looks no name up), what is known
// of the query (the client's address, its EDNS client subnet, the tenant
// label of a shuffle-sharded name) and a random source, it returns which
// records go into the answer.
//
// Selection is a pure function of its inputs, with no I/O and no server
// types in its API, so that the cohort simulator (sim) runs the very same
// code the DNS server runs. Records are identified by their index; the
// caller keeps whatever the index stands for (wire bytes in the server, an
// endpoint in the simulator).
//
// Set.Select is what most callers want. It writes into a caller-provided
// slice and does not allocate when that slice has room for every record of
// the set.
//
// The policies follow Amazon Route 53 where Route 53 has them:
//
//   - simple: every record, in random order; health is not consulted.
//   - weighted: one record, chosen with probability weight/sum among the
//     healthy records of non-zero weight; zero-weight records only when
//     every non-zero one is unhealthy; all-zero weights mean equal
//     chances; when none is healthy, the choice is made as if all were
//     (fail open).
//   - multivalue: up to N (default 8) healthy records, a random subset when
//     more are healthy; when none is healthy, up to N of all records.
//   - failover: the healthy primaries, else the healthy secondaries, else
//     the primaries (fail open).
//   - weighted-subset: N records sampled by weight without replacement from
//     the healthy ones; zero-weight records only fill up when too few
//     non-zero ones are healthy; fail open when none is healthy.
//   - shuffle: the tenant's hand of k records (package shard), with
//     health-aware spill to other records and fail-open.
//   - cidr: the records of the location whose prefix holds the client's
//     address (or its EDNS client subnet), longest prefix first, falling
//     back to the default location "*".
//
// The class of the query's resolver (Query.Class, by its share of the
// queries: ClassConfig.Of) is data as well: a big resolver gets more
// records of multivalue and weighted-subset sets (Config.BigN), and a
// weighted subset of a weighted set with Config.BigSubset.
//
// Each policy is one file that declares its *Policy (the fields it reads,
// their checks and its selection) and one entry in the list of policy.go.
//
// The package imports no server code of corral.
package answer
