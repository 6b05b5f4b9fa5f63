//go:build !race

package auth

// maxVerifyAllocs bounds one check's allocations (13 on 2026-12-02, 27
// with the claims through encoding/json and no scratch space).
const maxVerifyAllocs = 20
