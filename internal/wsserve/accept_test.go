package wsserve

import (
	"slices"
	"testing"
	"unsafe"
)

// TestUpgradeRequestKeepsNoPieceOfTheHead checks that the subprotocol
// handed to the upgrader is the server's own string (its most preferred
// of those offered, whatever the case the client wrote it in): the
// upgrader keeps it for the connection's life, and a piece of the request
// head would keep the whole head alive.
func TestUpgradeRequestKeepsNoPieceOfTheHead(t *testing.T) {
	subs := []string{"corral.v1.proto", "corral.v1.json"}
	head := []byte("GET /v1/ws HTTP/1.1\r\nHost: corral\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Protocol: other, Corral.V1.JSON\r\nSec-WebSocket-Protocol: corral.v1.proto\r\n\r\n")
	r, ok := upgradeRequest(head, "/v1/ws", subs, newUpgrade())
	if !ok {
		t.Fatal("upgrade refused")
	}
	got := r.Header["Sec-Websocket-Protocol"]
	if !slices.Equal(got, []string{"corral.v1.proto"}) {
		t.Fatalf("subprotocols %q, want the server's first choice of those offered", got)
	}
	if unsafe.StringData(got[0]) != unsafe.StringData(subs[0]) {
		t.Fatal("the subprotocols handed on are pieces of the request head, not the server's own strings")
	}
}

// newUpgrade returns a fresh upgrade, as upgrades makes them.
func newUpgrade() *upgrade { return upgrades.New().(*upgrade) }
