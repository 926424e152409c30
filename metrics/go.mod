module github.com/cantal-go/cantal/metrics

go 1.26.8

require github.com/cantal-go/cantal/shm v0.0.0

require (
	github.com/cantal-go/cantal/internal/jsonstr v0.0.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace (
	github.com/cantal-go/cantal/internal/jsonstr => ../internal/jsonstr
	github.com/cantal-go/cantal/shm => ../shm
)
