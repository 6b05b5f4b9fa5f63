// Package pick holds the choice of an origin for a new session as pure
// functions, shared by the edge (edge.Origins.Pick draws with TwoChoices)
// and the simulator (sim spreads cohorts by TwoChoiceShares, the exact
// probabilities of the same draw). It imports nothing of corral.
//
// The power of two choices (Mitzenmacher, "The Power of Two Choices in
// Randomized Load Balancing", 2001): draw two distinct candidates
// uniformly and keep the less loaded. A tie keeps the first drawn, which
// is itself uniform over the two: ties never favour a lower index.
package pick
