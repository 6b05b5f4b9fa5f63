package wire

import (
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"
)

// PushbackKey is the trailer of gRPC's retry pushback (gRFC A6): a
// server's retry hint as a non-negative count of milliseconds, read by
// clients whose status carries no RetryInfo.
const PushbackKey = "grpc-retry-pushback-ms"

// PushbackTrailer returns the trailer that carries c's retry hint as
// PushbackKey (in whole milliseconds, rounded down), or nil when c has
// none.
func PushbackTrailer(c Close) metadata.MD {
	if c.RetryAfter <= 0 {
		return nil
	}
	return metadata.Pairs(PushbackKey, strconv.FormatInt(c.RetryAfter.Milliseconds(), 10))
}

// Pushback reads the PushbackKey trailer as a retry hint; absent,
// negative or malformed is no hint (0).
func Pushback(md metadata.MD) time.Duration {
	v := md.Get(PushbackKey)
	if len(v) == 0 {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v[0]), 10, 32)
	if err != nil {
		return 0
	}
	return time.Duration(n) * time.Millisecond
}

// CloseFromStream is CloseFromStatus of the error that ended a gRPC
// stream, with the stream's PushbackKey trailer as the retry hint when
// the status carries none (a server that sends the trailer alone).
func CloseFromStream(err error, trailer metadata.MD) Close {
	c := CloseFromStatus(err)
	if c.RetryAfter == 0 {
		c.RetryAfter = Pushback(trailer)
	}
	return c
}
