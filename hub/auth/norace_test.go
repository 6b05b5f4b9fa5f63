//go:build !race

package auth

// maxVerifyAllocs bounds one check's allocations (16 on 2026-12-02, 27
// with the claims through encoding/json).
const maxVerifyAllocs = 20
