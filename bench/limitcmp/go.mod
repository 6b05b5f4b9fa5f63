module github.com/corralhq/corral/bench/limitcmp

go 1.26.0

require github.com/corralhq/corral v0.0.0

require github.com/failsafe-go/failsafe-go v0.9.8 // indirect

replace github.com/corralhq/corral => ../..
