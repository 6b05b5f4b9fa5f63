//go:build race

package auth

// maxVerifyAllocs bounds one check's allocations. With the race detector
// a sync.Pool drops a quarter of what it is given back, so the pooled HMAC
// states and validators are made again at random: a looser bound.
const maxVerifyAllocs = 30
