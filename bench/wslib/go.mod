module github.com/corralhq/corral/bench/wslib

go 1.26.0

require (
	github.com/coder/websocket v1.8.15
	github.com/gobwas/ws v1.5.0
	github.com/gorilla/websocket v1.5.3
	github.com/lesismal/nbio v1.6.8
	github.com/lxzan/gws v1.8.9
	golang.org/x/sys v0.49.0
)

require (
	github.com/dolthub/maphash v0.1.0 // indirect
	github.com/gobwas/httphead v0.1.0 // indirect
	github.com/klauspost/compress v1.17.9 // indirect
	github.com/lesismal/llib v1.2.2 // indirect
	golang.org/x/crypto v0.0.0-20210513122933-cd7d49e622d5 // indirect
)
