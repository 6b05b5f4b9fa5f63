// Package shard implements shuffle sharding: every tenant (a customer, a
// domain, a device cohort) gets its own hand of k workers out of n, so that
// one tenant's poison requests or flood reach only its hand and every other
// tenant keeps most or all of its own.
//
// It offers five ways to build hands and the maths to size them:
//
//   - Dealer: stateless keyed hands. A SipHash-2-4 of the tenant id under a
//     secret key picks an exactly uniform ordered hand; no state, no
//     allocation, the same hand in every process. Dealer.Pick adds the
//     health-aware choice most callers (the DNS answer policy) want.
//   - Stable: rendezvous (highest random weight) hands over named, weighted
//     workers. Adding or removing one worker changes only the hands that
//     contain it (after the change), each by exactly one member.
//   - Stable with zones: a zone lattice. Each hand takes ceil(k/zones)
//     workers from every zone, stable per zone, so it survives the loss of a
//     whole zone.
//   - Assigner: stored hands with a maximum overlap t: no two tenants share
//     more than t workers, as Route 53 promises for its name servers. The
//     assignments persist through a Store (FileStore by default).
//   - PickFrom: the health-aware pick for any hand and spill list.
//
// The maths (Hands, Overlap, Capacity, BlastRadius, Analyze) is exact, with
// math/big where counts overflow.
//
// # The dealer's construction
//
// A deal hashes the id once with SipHash-2-4-128 and reads the 128 bits as a
// binary fraction F in [0, 1). Multiplying by n, n-1, ..., n-k+1 in exact
// 128-bit fixed point peels off one digit per draw: digit i is in
// [0, n-i) and picks the i-th worker among those not drawn yet. The digits
// are the mixed-radix expansion of floor(F·P) with P = n·(n-1)···(n-k+1);
// the seed is rejected (and rehashed with a counter) when the fraction left
// over is below (2^128 mod P)/2^128, Lemire's test, so every ordered hand is
// produced by exactly floor(2^128/P) of the accepted seeds. Unlike a
// mixed-radix expansion of a hash taken modulo each radix, there is no
// modulo bias: were SipHash a random function, every hand would be exactly
// equally likely. The test suite checks this by enumerating every seed of a
// narrowed fraction on small decks.
//
// The entropy bound: log2(P) must not exceed MaxEntropyBits (96), which
// leaves 32 bits of slack and makes a second hash rarer than 2^-32 per deal.
// n = 2048, k = 4 needs 44 bits; k = 4 allows n up to 16.7 million; k = 8
// allows n up to 4099. NewDealer refuses configurations beyond the bound.
//
// # Health-aware picking
//
// A Choice lists the healthy members of the hand in the tenant's preference
// order. When fewer than MinHealthy are healthy the pick spills, in a fixed
// per-tenant order, to at most Spill extra workers; when the whole hand and
// its spill are down it fails open to the whole hand and says so
// (StatusFailOpen) rather than spreading one tenant over the fleet.
package shard
