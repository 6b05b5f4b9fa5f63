//go:build !race

package auth

// maxVerifyAllocs bounds one check's allocations (27 on 2026-12-02).
const maxVerifyAllocs = 30
